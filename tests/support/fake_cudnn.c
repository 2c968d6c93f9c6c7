/* A stand-in for libcudnn.so.9's backend API, for tests of the code that
 * drives it (kernels/cuda/host/cudnn_*.cpp) on machines without a GPU. It
 * keeps each descriptor's type, counts calls, and fails on request:
 *   FAKE_CUDNN_SET_FAIL=ATTRIBUTE:STATUS       cudnnBackendSetAttribute of that attribute
 *   FAKE_CUDNN_FINALIZE_FAIL=TYPE:STATUS       cudnnBackendFinalize of that descriptor type
 *   FAKE_CUDNN_ENGINES=N                       engine configurations the heuristics offer (default 1)
 * A plan's workspace size reads 4096; cudnnBackendExecute counts its calls. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long executed;

static int requested(const char* variable, long key, int* status) {
    const char* text = getenv(variable);
    long want = 0;
    if (text == NULL || sscanf(text, "%ld:%d", &want, status) != 2) return 0;
    return want == key;
}

size_t cudnnGetVersion(void) { return 91900; }

const char* cudnnGetErrorString(int s) {
    switch (s) {
        case 0: return "CUDNN_STATUS_SUCCESS";
        case 2000: return "CUDNN_STATUS_BAD_PARAM";
        case 3001: return "CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN";
        case 3002: return "CUDNN_STATUS_NOT_SUPPORTED_SHAPE";
        default: return "CUDNN_STATUS_(fake)";
    }
}

int cudnnCreate(void** h) { *h = malloc(1); return 0; }
int cudnnDestroy(void* h) { free(h); return 0; }
int cudnnSetStream(void* h, void* s) { (void)h; (void)s; return 0; }

int cudnnBackendCreateDescriptor(int type, void** d) {
    int* t = malloc(sizeof(int));
    *t = type;
    *d = t;
    return 0;
}

int cudnnBackendDestroyDescriptor(void* d) { free(d); return 0; }

int cudnnBackendSetAttribute(void* d, int name, int type, int64_t count, const void* elements) {
    int status = 0;
    (void)d; (void)type;
    if (count < 1 || elements == NULL) return 2000;
    return requested("FAKE_CUDNN_SET_FAIL", name, &status) ? status : 0;
}

int cudnnBackendGetAttribute(void* d, int name, int type, int64_t wanted, int64_t* count, void* elements) {
    (void)d; (void)type;
    if (name == 202) { /* CUDNN_ATTR_ENGINEHEUR_RESULTS */
        const char* text = getenv("FAKE_CUDNN_ENGINES");
        int64_t n = text != NULL ? atol(text) : 1;
        *count = n < wanted ? n : wanted;
        return 0;
    }
    if (name == 402) { /* CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE */
        int64_t bytes = 4096;
        memcpy(elements, &bytes, sizeof bytes);
        *count = 1;
        return 0;
    }
    return 2000;
}

int cudnnBackendFinalize(void* d) {
    int status = 0;
    return requested("FAKE_CUDNN_FINALIZE_FAIL", *(int*)d, &status) ? status : 0;
}

int cudnnBackendExecute(void* h, void* p, void* v) {
    (void)h; (void)p; (void)v;
    ++executed;
    return 0;
}

long fake_cudnn_executed(void) { return executed; }
