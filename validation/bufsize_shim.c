/* Logs the exact byte size of every ggml backend buffer llama.cpp allocates or maps,
 * because llama.cpp itself prints them only in MiB with two decimals (10 kB steps).
 * Loaded with LD_PRELOAD by llama_probe.py; calls through to the real functions. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>

typedef void *buft_t;
typedef void *buffer_t;
typedef void *dev_t_;

/* ctypes loads ggml with RTLD_LOCAL, so RTLD_NEXT cannot see it: look in the library. */
static void *real_sym(const char *name) {
    static void *lib = NULL;
    if (!lib) lib = dlopen("libggml-base.so.0", RTLD_LAZY | RTLD_NOLOAD);
    if (!lib) lib = dlopen("libggml-base.so", RTLD_LAZY | RTLD_NOLOAD);
    void *p = lib ? dlsym(lib, name) : NULL;
    return p ? p : dlsym(RTLD_NEXT, name);
}

static const char *buft_name(buft_t buft) {
    static const char *(*fn)(buft_t) = NULL;
    if (!fn) fn = (const char *(*)(buft_t))real_sym("ggml_backend_buft_name");
    return fn ? fn(buft) : "?";
}

buffer_t ggml_backend_buft_alloc_buffer(buft_t buft, size_t size) {
    static buffer_t (*real)(buft_t, size_t) = NULL;
    if (!real) real = (buffer_t(*)(buft_t, size_t))real_sym("ggml_backend_buft_alloc_buffer");
    buffer_t b = real(buft, size);
    fprintf(stderr, "RSBUF alloc %s %zu\n", buft_name(buft), size);
    fflush(stderr);
    return b;
}

buffer_t ggml_backend_dev_buffer_from_host_ptr(dev_t_ dev, void *ptr, size_t size, size_t max_tensor_size) {
    static buffer_t (*real)(dev_t_, void *, size_t, size_t) = NULL;
    if (!real) real = (buffer_t(*)(dev_t_, void *, size_t, size_t))real_sym("ggml_backend_dev_buffer_from_host_ptr");
    fprintf(stderr, "RSBUF mapped host %zu\n", size);
    fflush(stderr);
    return real(dev, ptr, size, max_tensor_size);
}
