/*
 * uml-xstate.so: LD_PRELOAD for Debian's User-Mode Linux 6.1 (/usr/bin/linux.uml) on hosts whose
 * XSAVE area is larger than UML's register buffer.
 *
 * UML 6.1 saves and restores a guest task's FPU state with ptrace(PTRACE_GETREGSET /
 * PTRACE_SETREGSET, NT_X86_XSTATE) into a buffer of sizeof(struct _xstate) as it was built:
 * 2,696 bytes in Debian's package (x87, SSE, AVX, AVX-512, PKRU). The host kernel returns a
 * truncated state for GETREGSET but refuses SETREGSET with EFAULT unless the buffer is the host's
 * whole XSAVE size, which AMX makes 11,008 bytes; so on such hosts UML panics at its first guest
 * process ("ptrace set fp regs failed, errno = 14").
 *
 * This wrapper keeps, per UML register buffer (one per guest task), a whole-size copy: GETREGSET
 * reads the whole state into it and hands UML its first part; SETREGSET lays UML's part (which UML
 * may have changed: signal frames, a new task's inherited state) over it and writes the whole
 * state back. A buffer first seen in SETREGSET (a new task) gets the components past UML's part in
 * their initial state (UML grants its guests no AMX, so theirs stay initial anyway). Every other
 * ptrace call, and every call whose buffer is the whole size, goes to glibc's ptrace unchanged.
 */
#define _GNU_SOURCE
#include <cpuid.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/types.h>
#include <sys/uio.h>

#define NT_X86_XSTATE_ 0x202
#define XSTATE_BV_OFFSET 512          /* the XSAVE header follows the 512-byte legacy area */
#define BUCKETS 4096

typedef long (*ptrace_fn)(int, pid_t, void *, void *);

struct saved {
    const void *key;                  /* UML's buffer */
    unsigned char *whole;
    struct saved *next;
};

static struct saved *table[BUCKETS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static size_t whole_size;             /* the host's XSAVE size for ptrace; 0 until known */
static size_t part_size;              /* UML's buffer size (one for all its calls), with whole_size */
static uint64_t part_components;      /* the XSAVE components wholly inside it */

static ptrace_fn real(void)
{
    static ptrace_fn fn;
    if (!fn)
        fn = (ptrace_fn)dlsym(RTLD_NEXT, "ptrace");
    return fn;
}

/* UML's buffer's whole-size copy, made (zeroed) when first seen: *made says so. */
static struct saved *find(const void *key, int *made)
{
    size_t h = ((uintptr_t)key >> 4) % BUCKETS;
    *made = 0;
    for (struct saved *s = table[h]; s; s = s->next)
        if (s->key == key)
            return s;
    struct saved *s = calloc(1, sizeof *s);
    if (!s || !(s->whole = calloc(1, whole_size))) {
        free(s);
        return NULL;
    }
    s->key = key;
    s->next = table[h];
    table[h] = s;
    *made = 1;
    return s;
}

/* The XSAVE components (bit mask) that lie wholly inside the first n bytes (standard format). */
static uint64_t components_within(size_t n)
{
    uint64_t mask = 3;                /* x87 and SSE: the legacy area */
    for (unsigned k = 2; k < 63; k++) {
        unsigned size, offset, ecx, edx;
        __cpuid_count(0xd, k, size, offset, ecx, edx);
        if (size && offset + (size_t)size <= n)
            mask |= 1ull << k;
    }
    return mask;
}

/* The host's whole size (a GETREGSET into a large buffer says it) and, for UML's buffer of n
 * bytes, which components it holds; once, at UML's first call. */
static long learn_sizes(pid_t pid, size_t n)
{
    static unsigned char probe[1 << 16];
    struct iovec iov = {probe, sizeof probe};
    long r = real()(PTRACE_GETREGSET, pid, (void *)NT_X86_XSTATE_, &iov);
    if (r == 0) {
        whole_size = iov.iov_len;
        part_size = n;
        part_components = components_within(n);
    }
    return r;
}

long ptrace(enum __ptrace_request request, ...)
{
    va_list ap;
    va_start(ap, request);
    pid_t pid = va_arg(ap, pid_t);
    void *addr = va_arg(ap, void *);
    void *data = va_arg(ap, void *);
    va_end(ap);

    if ((request != PTRACE_GETREGSET && request != PTRACE_SETREGSET) || (uintptr_t)addr != NT_X86_XSTATE_)
        return real()(request, pid, addr, data);
    struct iovec *iov = data;
    pthread_mutex_lock(&lock);
    if (!whole_size && learn_sizes(pid, iov->iov_len) != 0) {
        int e = errno;
        pthread_mutex_unlock(&lock);
        errno = e;
        return -1;
    }
    if (iov->iov_len >= whole_size) {
        pthread_mutex_unlock(&lock);
        return real()(request, pid, addr, data);
    }
    size_t n = iov->iov_len;
    int fresh;
    struct saved *s = find(iov->iov_base, &fresh);
    if (!s) {
        pthread_mutex_unlock(&lock);
        errno = ENOMEM;
        return -1;
    }
    struct iovec whole = {s->whole, whole_size};
    long r;
    if (request == PTRACE_GETREGSET) {
        r = real()(PTRACE_GETREGSET, pid, addr, &whole);
        if (r == 0)
            memcpy(iov->iov_base, s->whole, n);
    } else {
        memcpy(s->whole, iov->iov_base, n);
        if (fresh) {
            uint64_t bv;
            memcpy(&bv, s->whole + XSTATE_BV_OFFSET, sizeof bv);
            bv &= n == part_size ? part_components : components_within(n);
            memcpy(s->whole + XSTATE_BV_OFFSET, &bv, sizeof bv);
        }
        r = real()(PTRACE_SETREGSET, pid, addr, &whole);
    }
    int e = errno;
    pthread_mutex_unlock(&lock);
    errno = e;
    return r;
}
