/* Loads a GGUF with llama.cpp b11434 (linked from its static libraries in
 * ~/.cache/rigspark/llama-src/build) and logs the exact byte size of every ggml buffer it
 * allocates or maps: llama.cpp prints them in MiB with two decimals only. The build's
 * binaries are static, so LD_PRELOAD cannot reach ggml; the linker's --wrap does.
 *
 *   b11434_probe measure MODEL N_CTX N_SEQ TYPE_K TYPE_V FLASH_ATTN [N_RS_SEQ [UNIFIED [SWA_FULL]]]
 *   b11434_probe quantize SRC DST FTYPE
 *
 * Each buffer appears as "RSBUF alloc <buffer type> <bytes>" (or "RSBUF mapped host
 * <bytes>") right before llama.cpp's own "<name> ... buffer size" line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"
#include "ggml-backend.h"

#include "probe_wraps.h"

static int measure(int argc, char ** argv) {
    if (argc < 8) return 2;
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
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
    cp.n_rs_seq = argc > 8 ? (uint32_t) atoi(argv[8]) : 0;
    cp.kv_unified = argc > 9 && atoi(argv[9]) != 0;
    /* the C API defaults to a full-size SWA cache; llama-server and llama-cli do not */
    if (argc > 10) cp.swa_full = atoi(argv[10]) != 0;
    cp.n_threads = 2;
    cp.n_threads_batch = 2;
    struct llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) { fprintf(stderr, "context creation failed\n"); return 1; }
    fprintf(stderr, "RSDONE\n");
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}

static int quantize(int argc, char ** argv) {
    if (argc < 5) return 2;
    llama_backend_init();
    struct llama_model_quantize_params qp = llama_model_quantize_default_params();
    qp.ftype = (enum llama_ftype) atoi(argv[4]);
    qp.nthread = 2;
    return (int) llama_model_quantize(argv[2], argv[3], &qp);
}

int main(int argc, char ** argv) {
    if (argc > 1 && !strcmp(argv[1], "measure")) return measure(argc, argv);
    if (argc > 1 && !strcmp(argv[1], "quantize")) return quantize(argc, argv);
    fprintf(stderr, "usage: b11434_probe measure|quantize ...\n");
    return 2;
}
