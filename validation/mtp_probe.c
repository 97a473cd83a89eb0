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

#include "probe_wraps.h"

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
