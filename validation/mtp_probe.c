/* MTP drafting (llama-server --spec-type draft-mtp) with llama.cpp b11434, through its C
 * API as common/speculative.cpp drives it: the model loaded with load_mtp, the target
 * context with n_rs_seq = n_max (3), then the MTP draft context (LLAMA_CONTEXT_TYPE_MTP,
 * ctx_other = the target). Every ggml buffer's exact size is logged as in
 * b11434_probe.c ("RSBUF ..."), the draft context's after "RSMARK mtp".
 *
 *   mtp_probe measure MODEL N_CTX N_SEQ TYPE_K TYPE_V FLASH_ATTN MTP [UNIFIED [DRAFT_K DRAFT_V]]
 *
 * MTP 0: the plain load (MTP blocks skipped, no rollback rows), for the difference. */
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

static int measure(int argc, char ** argv) {
    if (argc < 9) return 2;
    const int mtp = atoi(argv[8]);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    mp.load_mtp = mtp != 0;
    struct llama_model * model = llama_model_load_from_file(argv[2], mp);
    if (!model) { fprintf(stderr, "model load failed\n"); return 1; }
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t) atoi(argv[3]);
    cp.n_batch = 512;
    cp.n_ubatch = 512;
    cp.n_seq_max = (uint32_t) atoi(argv[4]);
    cp.type_k = kv_type(argv[5]);
    cp.type_v = kv_type(argv[6]);
    cp.flash_attn_type = atoi(argv[7]) ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.kv_unified = argc > 9 && atoi(argv[9]) != 0;
    cp.swa_full = false;
    cp.n_threads = 2;
    cp.n_threads_batch = 2;
    /* common.h need_n_rs_seq: the draft length (n_max, default 3) while drafting */
    cp.n_rs_seq = mtp ? 3 : 0;
    struct llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) { fprintf(stderr, "context creation failed\n"); return 1; }
    struct llama_context * dft = NULL;
    if (mtp) {
        /* common_speculative_init_result with common_base_params_to_speculative: the
         * target's params, the draft cache types, n_parallel outputs of one per sequence,
         * no rollback rows, the target as ctx_other */
        struct llama_context_params dp = cp;
        dp.ctx_type = LLAMA_CONTEXT_TYPE_MTP;
        dp.n_ctx = llama_n_ctx(ctx);
        dp.n_rs_seq = 0;
        dp.ctx_other = ctx;
        dp.type_k = kv_type(argc > 10 ? argv[10] : "f16");
        dp.type_v = kv_type(argc > 11 ? argv[11] : "f16");
        dp.n_outputs_max = cp.n_seq_max;
        dp.n_outputs_max_per_seq = 1;
        fprintf(stderr, "RSMARK mtp\n");
        dft = llama_init_from_model(model, dp);
        if (!dft) { fprintf(stderr, "MTP context creation failed\n"); return 1; }
    }
    fprintf(stderr, "RSDONE\n");
    if (dft) llama_free(dft);
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}

int main(int argc, char ** argv) {
    if (argc > 1 && !strcmp(argv[1], "measure")) return measure(argc, argv);
    fprintf(stderr, "usage: mtp_probe measure MODEL N_CTX N_SEQ TYPE_K TYPE_V FLASH_ATTN MTP [UNIFIED [DRAFT_K DRAFT_V]]\n");
    return 2;
}
