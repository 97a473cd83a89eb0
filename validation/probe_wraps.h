/* Shared by the b11434 probes (b11434_probe.c, mtp_probe.c): the linker's --wrap shims
 * that log every ggml buffer's exact size ("RSBUF ..."), and the K/V type names. */
#pragma once
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"
#include "ggml-backend.h"

ggml_backend_buffer_t __real_ggml_backend_buft_alloc_buffer(ggml_backend_buffer_type_t buft, size_t size);
ggml_backend_buffer_t __wrap_ggml_backend_buft_alloc_buffer(ggml_backend_buffer_type_t buft, size_t size) {
    ggml_backend_buffer_t b = __real_ggml_backend_buft_alloc_buffer(buft, size);
    fprintf(stderr, "RSBUF alloc %s %zu\n", ggml_backend_buft_name(buft), size);
    fflush(stderr);
    return b;
}

/* ggml_backend_alloc_ctx_tensors_from_buft (KV, RS, weights without mmap) comes here;
 * its own calls to ggml_backend_buft_alloc_buffer stay inside ggml-backend.cpp */
ggml_backend_buffer_t __real_ggml_backend_buft_alloc_buffer_n(ggml_backend_buffer_type_t buft, struct ggml_tensor ** tensors, int n_tensors);
ggml_backend_buffer_t __wrap_ggml_backend_buft_alloc_buffer_n(ggml_backend_buffer_type_t buft, struct ggml_tensor ** tensors, int n_tensors) {
    ggml_backend_buffer_t b = __real_ggml_backend_buft_alloc_buffer_n(buft, tensors, n_tensors);
    fprintf(stderr, "RSBUF alloc %s %zu\n", ggml_backend_buft_name(buft), b ? ggml_backend_buffer_get_size(b) : (size_t) 0);
    fflush(stderr);
    return b;
}

ggml_backend_buffer_t __real_ggml_backend_dev_buffer_from_host_ptr(ggml_backend_dev_t dev, void * ptr, size_t size, size_t max_tensor_size);
ggml_backend_buffer_t __wrap_ggml_backend_dev_buffer_from_host_ptr(ggml_backend_dev_t dev, void * ptr, size_t size, size_t max_tensor_size) {
    fprintf(stderr, "RSBUF mapped host %zu\n", size);
    fflush(stderr);
    return __real_ggml_backend_dev_buffer_from_host_ptr(dev, ptr, size, max_tensor_size);
}

static enum ggml_type kv_type(const char * s) {
    if (!strcmp(s, "f16")) return GGML_TYPE_F16;
    if (!strcmp(s, "q8_0")) return GGML_TYPE_Q8_0;
    if (!strcmp(s, "q4_0")) return GGML_TYPE_Q4_0;
    if (!strcmp(s, "f32")) return GGML_TYPE_F32;
    fprintf(stderr, "unknown cache type %s\n", s);
    exit(2);
}
