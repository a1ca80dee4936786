/* The measurement behind whisper.cpp's published board figures (its examples/bench tool,
 * ggml-org/whisper.cpp#89): one encoder pass over a full 30 s window (zero mel), with N
 * threads, repeated; prints one "encode_ms X" line per pass. Built against the
 * whisper.cpp that whisper-rs-sys compiled for sarcasmd (scripts/emulate-board.sh does
 * it), so the host figure comes from the same code the daemon runs.
 *   encode_bench MODEL.bin THREADS [PASSES] */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "whisper.h"

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void quiet(enum ggml_log_level level, const char *text, void *user) {
    (void)level; (void)text; (void)user;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL.bin THREADS [PASSES]\n", argv[0]);
        return 2;
    }
    int threads = atoi(argv[2]);
    int passes = argc > 3 ? atoi(argv[3]) : 5;
    if (threads < 1 || passes < 1) {
        fprintf(stderr, "THREADS and PASSES must be >= 1\n");
        return 2;
    }
    whisper_log_set(quiet, NULL);
    struct whisper_context_params cp = whisper_context_default_params();
    cp.use_gpu = 0;
    struct whisper_context *ctx = whisper_init_from_file_with_params(argv[1], cp);
    if (!ctx) {
        fprintf(stderr, "%s: cannot load the model\n", argv[1]);
        return 1;
    }
    /* As upstream's bench: a zero mel of the full context (3000 frames = 30 s). */
    if (whisper_set_mel(ctx, NULL, 0, whisper_model_n_mels(ctx)) != 0) {
        fprintf(stderr, "whisper_set_mel failed\n");
        return 1;
    }
    for (int i = 0; i < passes; i++) {
        double t0 = now_ms();
        if (whisper_encode(ctx, 0, threads) != 0) {
            fprintf(stderr, "whisper_encode failed\n");
            return 1;
        }
        printf("encode_ms %.1f\n", now_ms() - t0);
        fflush(stdout);
    }
    whisper_free(ctx);
    return 0;
}
