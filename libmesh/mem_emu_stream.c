/* Streams and events of the emulated device. A stream is a thread running its queue in order,
 * each operation after MESH_DEVICE_EMU_DELAY_US, so that work the library or a test forgets to
 * order on a stream runs visibly late; an event is a count of operations enqueued on a stream. */
#define MESH_LOG_SUBSYSTEM "mem"
#include "libmesh/mem_emu.h"
#include "libmesh/dtype.h"
#include "libmesh/log.h"
#include "libmesh/reduce.h"
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum emu_kind { EMU_COPY, EMU_REDUCE, EMU_SCALE, EMU_DIVIDE, EMU_WRITE, EMU_WAIT, EMU_WAIT_EVENT };

struct emu_stream;

struct emu_op {
    enum emu_kind kind;
    void *dst;
    const void *a, *b;
    size_t n; /* bytes (copy) or elements */
    mesh_dtype_t dtype;
    mesh_op_t op;
    int div;
    unsigned char scalar[16];
    uint32_t *flag;
    uint32_t value;
    struct emu_stream *other; /* EMU_WAIT_EVENT: the event's stream and its count */
    uint64_t target;
    struct emu_op *next;
};

struct emu_stream {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct emu_op *head, *tail;
    uint64_t submitted; /* under lock */
    _Atomic uint64_t completed;
    atomic_int stop; /* read by the stream's waits without the lock */
    pthread_t thread;
};

struct emu_event {
    struct emu_stream *stream; /* NULL until recorded */
    uint64_t target;
};

static long emu_delay_us;
static atomic_int emu_held;
static struct emu_stream *emu_default;
static pthread_once_t emu_default_once = PTHREAD_ONCE_INIT;

void mesh_mem_emu_stream_configure(long delay_us)
{
    emu_delay_us = delay_us;
}

void mesh_mem_emu_hold(int hold)
{
    atomic_store(&emu_held, hold);
}

static void emu_pause(unsigned *idle)
{
    if (++*idle < 64)
        sched_yield();
    else
        usleep(20);
}

static void emu_run(struct emu_stream *s, struct emu_op *o)
{
    unsigned idle = 0;
    switch (o->kind) {
    case EMU_COPY:
        memmove(o->dst, o->a, o->n);
        break;
    case EMU_REDUCE:
        mesh_reduce_local3(o->dst, o->a, o->b, o->n, o->dtype, o->op);
        break;
    case EMU_SCALE:
        mesh_reduce_scale(o->dst, o->a, o->n, o->dtype, o->scalar);
        break;
    case EMU_DIVIDE:
        mesh_reduce_divide(o->dst, o->n, o->dtype, o->div);
        break;
    case EMU_WRITE:
        __atomic_store_n(o->flag, o->value, __ATOMIC_RELEASE);
        break;
    case EMU_WAIT:
        /* as cuStreamWaitValue32 with CU_STREAM_WAIT_VALUE_GEQ, on wrapping counts */
        while ((int32_t)(__atomic_load_n(o->flag, __ATOMIC_ACQUIRE) - o->value) < 0 &&
               !atomic_load(&s->stop))
            emu_pause(&idle);
        break;
    case EMU_WAIT_EVENT:
        while (atomic_load_explicit(&o->other->completed, memory_order_acquire) < o->target &&
               !atomic_load(&s->stop))
            emu_pause(&idle);
        break;
    }
}

static void *emu_thread(void *arg)
{
    struct emu_stream *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->lock);
        while (s->head == NULL && !atomic_load(&s->stop))
            pthread_cond_wait(&s->cond, &s->lock);
        struct emu_op *o = s->head;
        if (o == NULL) {
            pthread_mutex_unlock(&s->lock);
            break;
        }
        s->head = o->next;
        if (s->head == NULL)
            s->tail = NULL;
        pthread_mutex_unlock(&s->lock);
        unsigned idle = 0;
        while (atomic_load(&emu_held) && !atomic_load(&s->stop))
            emu_pause(&idle);
        if (emu_delay_us > 0)
            usleep((useconds_t)emu_delay_us);
        emu_run(s, o);
        free(o);
        atomic_fetch_add_explicit(&s->completed, 1, memory_order_release);
    }
    return NULL;
}

static mesh_status_t emu_stream_new(struct emu_stream **out)
{
    struct emu_stream *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return mesh_error(MESH_ERR_NO_MEMORY, "emu: cannot allocate a stream");
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
    if (pthread_create(&s->thread, NULL, emu_thread, s) != 0) {
        free(s);
        return mesh_error(MESH_ERR_NO_MEMORY, "emu: cannot start a stream's thread");
    }
    *out = s;
    return MESH_OK;
}

static void emu_default_create(void)
{
    if (emu_stream_new(&emu_default) != MESH_OK)
        emu_default = NULL;
}

static struct emu_stream *emu_stream(void *stream)
{
    if (stream != NULL)
        return stream;
    pthread_once(&emu_default_once, emu_default_create);
    return emu_default;
}

static mesh_status_t emu_enqueue(void *stream, const struct emu_op *tmpl)
{
    struct emu_stream *s = emu_stream(stream);
    if (s == NULL)
        return mesh_error(MESH_ERR_NO_MEMORY, "emu: no default stream");
    struct emu_op *o = malloc(sizeof(*o));
    if (o == NULL)
        return mesh_error(MESH_ERR_NO_MEMORY, "emu: cannot enqueue an operation");
    *o = *tmpl;
    o->next = NULL;
    pthread_mutex_lock(&s->lock);
    if (s->tail)
        s->tail->next = o;
    else
        s->head = o;
    s->tail = o;
    s->submitted++;
    pthread_cond_signal(&s->cond);
    pthread_mutex_unlock(&s->lock);
    return MESH_OK;
}

mesh_status_t mesh_mem_emu_stream_create(void **stream)
{
    struct emu_stream *s;
    MESH_CHECK(emu_stream_new(&s));
    *stream = s;
    return MESH_OK;
}

/* Runs what is queued, then ends the thread. */
void mesh_mem_emu_stream_destroy(void *stream)
{
    struct emu_stream *s = stream;
    if (s == NULL || s == emu_default)
        return;
    pthread_mutex_lock(&s->lock);
    atomic_store(&s->stop, 1);
    pthread_cond_signal(&s->cond);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->thread, NULL);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->cond);
    free(s);
}

mesh_status_t mesh_mem_emu_event_create(void **event)
{
    struct emu_event *e = calloc(1, sizeof(*e));
    if (e == NULL)
        return mesh_error(MESH_ERR_NO_MEMORY, "emu: cannot allocate an event");
    *event = e;
    return MESH_OK;
}

void mesh_mem_emu_event_destroy(void *event)
{
    free(event);
}

mesh_status_t mesh_mem_emu_event_record(void *event, void *stream)
{
    struct emu_event *e = event;
    struct emu_stream *s = emu_stream(stream);
    if (s == NULL)
        return mesh_error(MESH_ERR_NO_MEMORY, "emu: no default stream");
    pthread_mutex_lock(&s->lock);
    e->target = s->submitted;
    pthread_mutex_unlock(&s->lock);
    e->stream = s;
    return MESH_OK;
}

mesh_status_t mesh_mem_emu_event_query(void *event)
{
    const struct emu_event *e = event;
    if (e->stream == NULL)
        return MESH_OK;
    return atomic_load_explicit(&e->stream->completed, memory_order_acquire) >= e->target
               ? MESH_OK
               : MESH_INPROGRESS;
}

mesh_status_t mesh_mem_emu_stream_wait_event(void *stream, void *event)
{
    const struct emu_event *e = event;
    if (e->stream == NULL)
        return MESH_OK;
    return emu_enqueue(
        stream, &(struct emu_op){.kind = EMU_WAIT_EVENT, .other = e->stream, .target = e->target});
}

mesh_status_t mesh_mem_emu_stream_sync(void *stream)
{
    struct emu_event e;
    MESH_CHECK(mesh_mem_emu_event_record(&e, stream));
    unsigned idle = 0;
    while (mesh_mem_emu_event_query(&e) == MESH_INPROGRESS)
        emu_pause(&idle);
    return MESH_OK;
}

mesh_status_t mesh_mem_emu_copy_async(void *dst, const void *src, size_t bytes, void *stream)
{
    if (bytes == 0)
        return MESH_OK;
    return emu_enqueue(stream,
                       &(struct emu_op){.kind = EMU_COPY, .dst = dst, .a = src, .n = bytes});
}

mesh_status_t mesh_mem_emu_reduce_async(void *dst, const void *a, const void *b, size_t count,
                                        mesh_dtype_t dtype, mesh_op_t op, void *stream)
{
    return emu_enqueue(
        stream,
        &(struct emu_op){
            .kind = EMU_REDUCE, .dst = dst, .a = a, .b = b, .n = count, .dtype = dtype, .op = op});
}

mesh_status_t mesh_mem_emu_scale_async(void *dst, const void *src, size_t count, mesh_dtype_t dtype,
                                       const void *scalar, void *stream)
{
    struct emu_op o = {.kind = EMU_SCALE, .dst = dst, .a = src, .n = count, .dtype = dtype};
    memcpy(o.scalar, scalar, mesh_dtype_size(dtype)); /* read at enqueue time */
    return emu_enqueue(stream, &o);
}

mesh_status_t mesh_mem_emu_divide_async(void *buf, size_t count, mesh_dtype_t dtype, int n,
                                        void *stream)
{
    return emu_enqueue(
        stream,
        &(struct emu_op){.kind = EMU_DIVIDE, .dst = buf, .n = count, .dtype = dtype, .div = n});
}

mesh_status_t mesh_mem_emu_stream_write(void *stream, uint32_t *flag, uint32_t value)
{
    return emu_enqueue(stream, &(struct emu_op){.kind = EMU_WRITE, .flag = flag, .value = value});
}

mesh_status_t mesh_mem_emu_stream_wait(void *stream, uint32_t *flag, uint32_t value)
{
    return emu_enqueue(stream, &(struct emu_op){.kind = EMU_WAIT, .flag = flag, .value = value});
}
