/*
 * Plain driver of a fuzz target: runs it once on every file named, and on every file of every
 * folder named, so that a compiler without libFuzzer replays the corpus (make check). A crash
 * or a sanitizer report fails the run; the last file's name is printed first, so that it says
 * which input did it.
 */
#include "tests/fuzz/fuzz.h"

/* libFuzzer brings its own main */
#ifndef MESH_FUZZ_LIBFUZZER

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        perror(path);
        return -1;
    }
    size_t cap = 4096, len = 0;
    uint8_t *buf = malloc(cap);
    for (size_t n; buf != NULL && (n = fread(buf + len, 1, cap - len, f)) > 0;) {
        len += n;
        if (len == cap) {
            uint8_t *b = realloc(buf, cap *= 2);
            if (b == NULL)
                free(buf);
            buf = b;
        }
    }
    fclose(f);
    if (buf == NULL) {
        fprintf(stderr, "%s: no memory\n", path);
        return -1;
    }
    fprintf(stderr, "replay %s (%zu bytes)\n", path, len);
    /* an exact-size copy, so that a sanitizer sees reads past the input's end */
    uint8_t *exact = malloc(len ? len : 1);
    if (exact == NULL) {
        free(buf);
        return -1;
    }
    memcpy(exact, buf, len);
    free(buf);
    LLVMFuzzerTestOneInput(exact, len);
    free(exact);
    return 0;
}

static int cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
    int files = 0, bad = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            perror(argv[i]);
            bad++;
            continue;
        }
        if (!S_ISDIR(st.st_mode)) {
            bad += replay_file(argv[i]) != 0;
            files++;
            continue;
        }
        struct dirent **names;
        int n = scandir(argv[i], &names, NULL, NULL);
        if (n < 0) {
            perror(argv[i]);
            bad++;
            continue;
        }
        char **paths = calloc((size_t)n, sizeof(*paths));
        int np = 0;
        for (int k = 0; k < n; k++) {
            if (names[k]->d_name[0] != '.' && paths != NULL) {
                size_t l = strlen(argv[i]) + strlen(names[k]->d_name) + 2;
                if ((paths[np] = malloc(l)) != NULL)
                    snprintf(paths[np++], l, "%s/%s", argv[i], names[k]->d_name);
            }
            free(names[k]);
        }
        free(names);
        if (paths != NULL)
            qsort(paths, (size_t)np, sizeof(*paths), cmp);
        for (int k = 0; k < np; k++) {
            bad += replay_file(paths[k]) != 0;
            files++;
            free(paths[k]);
        }
        free(paths);
    }
    printf("%s: %d input(s) replayed%s\n", argc > 0 ? argv[0] : "replay", files,
           bad ? ", some unreadable" : "");
    return bad ? 1 : 0;
}

#endif
