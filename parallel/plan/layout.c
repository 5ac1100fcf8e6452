/* Layouts as text: "tp=8,pp=8,zero=1,mbs=1,schedule=interleaved,vpp=2,recompute=selective"
 * (and even=1 for stages of equal layers). */
#include "planner.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const plan_rc_names[MESH_PLAN_RECOMPUTE_COUNT] = {"none", "selective", "full"};

const char *mesh_plan_recompute_name(mesh_plan_recompute_t r)
{
    return r >= 0 && r < MESH_PLAN_RECOMPUTE_COUNT ? plan_rc_names[r] : "unknown";
}

static int plan_word(const char *s, size_t len, const char *word)
{
    return strlen(word) == len && strncasecmp(s, word, len) == 0;
}

static int plan_sched_of(const char *s, size_t len)
{
    /* the pipeline's names (mesh_pp_kind_name) of the schedules planned, and their aliases */
    for (int k = 0; k < MESH_PP_KIND_COUNT; k++)
        if ((PLAN_SCHEDULES | 1u << MESH_PP_NONE) >> k & 1 &&
            plan_word(s, len, mesh_pp_kind_name((mesh_pp_kind_t)k)))
            return k;
    if (plan_word(s, len, "gpipe"))
        return MESH_PP_AFAB;
    if (plan_word(s, len, "zbh1") || plan_word(s, len, "zb-h1") || plan_word(s, len, "zb"))
        return MESH_PP_ZB1;
    return -1;
}

static int plan_rc_of(const char *s, size_t len)
{
    for (int i = 0; i < MESH_PLAN_RECOMPUTE_COUNT; i++)
        if (plan_word(s, len, plan_rc_names[i]))
            return i;
    return -1;
}

mesh_status_t mesh_plan_layout_parse(const char *spec, mesh_plan_layout_t *layout, unsigned *set)
{
    static const struct {
        const char *key;
        unsigned bit;
        size_t off;
        int lo, hi;
    } keys[] = {
        {"tp", MESH_PLAN_SET_TP, offsetof(mesh_plan_layout_t, tp), 1, 1 << 20},
        {"cp", MESH_PLAN_SET_CP, offsetof(mesh_plan_layout_t, cp), 1, 1 << 20},
        {"ep", MESH_PLAN_SET_EP, offsetof(mesh_plan_layout_t, ep), 1, 1 << 20},
        {"etp", MESH_PLAN_SET_ETP, offsetof(mesh_plan_layout_t, etp), 1, 1 << 20},
        {"dp", MESH_PLAN_SET_DP, offsetof(mesh_plan_layout_t, dp), 1, 1 << 24},
        {"pp", MESH_PLAN_SET_PP, offsetof(mesh_plan_layout_t, pp), 1, 1 << 20},
        {"zero", MESH_PLAN_SET_ZERO, offsetof(mesh_plan_layout_t, zero), 0, 3},
        {"mbs", MESH_PLAN_SET_MBS, offsetof(mesh_plan_layout_t, mbs), 1, 1 << 20},
        {"vpp", MESH_PLAN_SET_VPP, offsetof(mesh_plan_layout_t, vpp), 1, 1 << 10},
        {"sp", MESH_PLAN_SET_SP, offsetof(mesh_plan_layout_t, sp), 0, 1},
        {"even", MESH_PLAN_SET_EVEN, offsetof(mesh_plan_layout_t, even), 0, 1},
    };
    static const struct { /* the keys whose values are names */
        const char *key;
        unsigned bit;
        int (*of)(const char *s, size_t len);
        const char *choices;
    } names[] = {
        {"schedule", MESH_PLAN_SET_SCHEDULE, plan_sched_of, "afab, 1f1b, interleaved, zb1 or none"},
        {"recompute", MESH_PLAN_SET_RECOMPUTE, plan_rc_of, "none, selective or full"},
    };
    if (!spec || !layout || !set)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "mesh_plan_layout_parse: NULL argument");
    mesh_plan_layout_t l = *layout;
    unsigned got = *set;
    for (const char *s = spec; *s;) {
        size_t item = strcspn(s, ",");
        size_t klen = strcspn(s, "=,");
        const char *val = s + klen + 1;
        size_t vlen = item > klen ? item - klen - 1 : 0;
        if (s[klen] != '=' || vlen == 0)
            return mesh_par_error(MESH_ERR_INVALID_ARG, "layout: '%.*s' is not KEY=VALUE",
                                  (int)item, s);
        int done = 0;
        for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
            if (!plan_word(s, klen, names[k].key))
                continue;
            int v = names[k].of(val, vlen);
            if (v < 0)
                return mesh_par_error(MESH_ERR_INVALID_ARG, "layout: %s '%.*s' is not %s",
                                      names[k].key, (int)vlen, val, names[k].choices);
            if (names[k].bit == MESH_PLAN_SET_SCHEDULE)
                l.schedule = (mesh_pp_kind_t)v;
            else
                l.recompute = (mesh_plan_recompute_t)v;
            got |= names[k].bit;
            done = 1;
        }
        for (size_t k = 0; !done && k < sizeof(keys) / sizeof(keys[0]); k++) {
            if (!plan_word(s, klen, keys[k].key))
                continue;
            char buf[32], *end;
            if (vlen >= sizeof(buf))
                return mesh_par_error(MESH_ERR_INVALID_ARG, "layout: %s value is too long",
                                      keys[k].key);
            memcpy(buf, val, vlen);
            buf[vlen] = 0;
            errno = 0;
            long v = strtol(buf, &end, 10);
            if (*end || errno || v < keys[k].lo || v > keys[k].hi)
                return mesh_par_error(MESH_ERR_INVALID_ARG,
                                      "layout: %s=%s is not a number in "
                                      "%d..%d",
                                      keys[k].key, buf, keys[k].lo, keys[k].hi);
            *(int *)((char *)&l + keys[k].off) = (int)v;
            got |= keys[k].bit;
            done = 1;
        }
        if (!done)
            return mesh_par_error(MESH_ERR_INVALID_ARG,
                                  "layout: unknown key '%.*s' (tp, cp, ep, "
                                  "etp, dp, pp, zero, mbs, schedule, vpp, recompute, sp, even)",
                                  (int)klen, s);
        s += item + (s[item] == ',');
    }
    *layout = l;
    *set = got;
    return MESH_OK;
}

int mesh_plan_layout_format(const mesh_plan_layout_t *l, char *buf, size_t len)
{
    if (!l || (!buf && len))
        return -1;
    char tmp[256];
    int n = 0;
    /* sizes left 0 (to be derived) are left out, so the text parses back */
    const struct {
        const char *key;
        int v;
    } sizes[] = {{"tp", l->tp},   {"cp", l->cp}, {"ep", l->ep},
                 {"etp", l->etp}, {"dp", l->dp}, {"pp", l->pp}};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        if (sizes[i].v > 0)
            n += snprintf(tmp + n, sizeof(tmp) - n, "%s=%d,", sizes[i].key, sizes[i].v);
    n += snprintf(tmp + n, sizeof(tmp) - n, "zero=%d,", l->zero);
    if (l->mbs > 0)
        n += snprintf(tmp + n, sizeof(tmp) - n, "mbs=%d,", l->mbs);
    n += snprintf(tmp + n, sizeof(tmp) - n, "schedule=%s,", mesh_pp_kind_name(l->schedule));
    if (l->schedule == MESH_PP_INTERLEAVED && l->vpp > 0)
        n += snprintf(tmp + n, sizeof(tmp) - n, "vpp=%d,", l->vpp);
    n += snprintf(tmp + n, sizeof(tmp) - n, "recompute=%s,sp=%d%s",
                  mesh_plan_recompute_name(l->recompute), l->sp ? 1 : 0, l->even ? ",even=1" : "");
    return snprintf(buf, len, "%s", tmp);
}

void plan_axes_text(const mesh_plan_layout_t *l, int moe, char *buf, size_t len)
{
    if (moe)
        snprintf(buf, len, "tp=%d cp=%d ep=%d etp=%d dp=%d pp=%d", l->tp, l->cp, l->ep, l->etp,
                 l->dp, l->pp);
    else
        snprintf(buf, len, "tp=%d cp=%d dp=%d pp=%d", l->tp, l->cp, l->dp, l->pp);
}
