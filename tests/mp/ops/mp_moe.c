/*
 * The MoE dispatch and combine op (cco/cco_moe.h) on the host platform, one
 * rank of a job started by ccorun:
 *
 *   ccorun -n N mp_moe [--seed S]
 *
 * Every rank can compute every rank's tokens, weights, scales and routing
 * from the seed, so each checks what it received against the full
 * reference: every slot holds a token that chose one of its experts, each
 * such token exactly once, its row, scales, weights and ids bit for bit,
 * and the count. The "expert" scales each row by (rank + 1); combine must
 * give back, for each token, its row times the sum of (d + 1) over the
 * ranks d it went to (small integers: exact in bf16), and the weights of
 * the owning ranks. Cases: random routings (bf16 and fp8, both modes),
 * tokens with several experts on one rank, no tokens on some ranks, every
 * token to one rank at full capacity, dropped choices (-1), an overflow and
 * a bad expert id (that call fails, the op stays usable), the copy
 * fallback (counted) against the zero-copy path, argument and order
 * errors, and a config mismatch.
 */
#include <stdint.h>
#include <stdlib.h>

#include "../mp_util.h"
#include "cco/cco_coll.h"
#include "cco/cco_moe.h"

static int g_rank, g_size;
static ccoComm* g_comm;
static uint64_t g_seed = 12345;

#define OK(call) MP_CHECK((call) == ccoSuccess, "%s: %s", #call, ccoGetLastError(g_comm))

/* splitmix64: the same numbers on every rank. */
static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
static uint64_t rnd(uint64_t a, uint64_t b, uint64_t c, uint64_t d) { return mix(mix(mix(mix(g_seed ^ a) ^ b) ^ c) ^ d); }

/* How a case routes tokens. */
typedef enum { ROUTE_RANDOM, ROUTE_ONE_RANK, ROUTE_SAME_RANK, ROUTE_DROPS, ROUTE_BAD_ID } route_kind;

typedef struct {
  const char* name;
  ccoMoeConfig cfg;
  route_kind route;
  int iters;
  int emptyRank; /* a rank that sends no tokens (-1: none) */
  int fullTokens; /* every rank sends maxTokensPerRank */
  int copyPath;   /* the expert writes its own buffer (combine copies) */
  int combineWeights; /* pass weights to combine (2 x the dispatched) */
} moe_case;

static int tokens_of(const moe_case* c, int rank, int iter) {
  if (rank == c->emptyRank) return 0;
  if (c->fullTokens) return c->cfg.maxTokensPerRank;
  return (int)(rnd(1, (uint64_t)rank, (uint64_t)iter, 0) % (uint64_t)(c->cfg.maxTokensPerRank + 1));
}

static int nexperts(const moe_case* c) { return c->cfg.expertsPerRank * g_size; }

static int32_t expert_of(const moe_case* c, int rank, int iter, int t, int j) {
  int E = nexperts(c), k = c->cfg.topk;
  uint64_t r = rnd(2, (uint64_t)rank, (uint64_t)iter, (uint64_t)t * 64u + (uint64_t)j);
  switch (c->route) {
    case ROUTE_ONE_RANK: return (int32_t)((r + (uint64_t)j) % (uint64_t)c->cfg.expertsPerRank); /* rank 0 */
    case ROUTE_SAME_RANK: {
      int d = (int)(rnd(3, (uint64_t)rank, (uint64_t)iter, (uint64_t)t) % (uint64_t)g_size);
      return (int32_t)(d * c->cfg.expertsPerRank + (j % c->cfg.expertsPerRank));
    }
    case ROUTE_DROPS: return (r & 3u) == 0 ? -1 : (int32_t)(r % (uint64_t)E);
    case ROUTE_BAD_ID: return (t == 0 && j == k - 1 && rank == 0) ? (int32_t)E + 3 : (int32_t)(r % (uint64_t)E);
    default: break;
  }
  /* Distinct experts per token, as a router's top-k gives. */
  for (;;) {
    int32_t e = (int32_t)(r % (uint64_t)E);
    int dup = 0;
    for (int i = 0; i < j; i++) dup |= expert_of(c, rank, iter, t, i) == e;
    if (!dup || E < k) return e;
    r = mix(r);
  }
}

/* A token's element i: a small integer (exact in bf16 and fp8 e4m3). */
static int value_of(int rank, int iter, int t, int i) { return (int)(rnd(4, (uint64_t)rank, (uint64_t)iter, (uint64_t)t * 1048576u + (uint64_t)i) % 7u) - 3; }
static uint8_t fp8_of(int v) { /* e4m3 of -3..3: sign, exponent (bias 7), 3 mantissa bits */
  if (v == 0) return 0;
  int a = v < 0 ? -v : v;
  uint8_t bits = a == 1 ? (uint8_t)(7u << 3) : a == 2 ? (uint8_t)(8u << 3) : (uint8_t)((8u << 3) | 4u);
  return (uint8_t)(bits | (v < 0 ? 0x80u : 0u));
}
static float weight_of(int rank, int iter, int t, int j) { return (float)(rnd(5, (uint64_t)rank, (uint64_t)iter, (uint64_t)t * 64u + (uint64_t)j) % 1000u) / 1000.0f; }
static float scale_of(int rank, int iter, int t, int b) { return 1.0f + (float)(rnd(6, (uint64_t)rank, (uint64_t)iter, (uint64_t)t * 4096u + (uint64_t)b) % 16u); }

static int fp8(const moe_case* c) { return c->cfg.dispatchType == ccoMoeFp8E4M3; }
static size_t token_bytes(const moe_case* c) { return (size_t)c->cfg.hidden * (fp8(c) ? 1u : 2u); }

/* Rank `rank`'s inputs of iteration `iter`. */
typedef struct {
  int n;
  void* x;
  float* w;
  float* s;
  int32_t* idx;
} inputs;

static void make_inputs(const moe_case* c, int rank, int iter, inputs* in) {
  int n = tokens_of(c, rank, iter), h = c->cfg.hidden, k = c->cfg.topk, sc = fp8(c) ? h / CCO_MOE_SCALE_BLOCK : 0;
  in->n = n;
  in->x = aligned_alloc(64, ((size_t)n * token_bytes(c) + 64) / 64 * 64);
  in->w = malloc(((size_t)n * (size_t)k + 1) * sizeof(float));
  in->s = malloc(((size_t)n * (size_t)sc + 1) * sizeof(float));
  in->idx = malloc(((size_t)n * (size_t)k + 1) * sizeof(int32_t));
  for (int t = 0; t < n; t++) {
    for (int i = 0; i < h; i++) {
      int v = value_of(rank, iter, t, i);
      if (fp8(c)) ((uint8_t*)in->x)[(size_t)t * h + i] = fp8_of(v);
      else ((uint16_t*)in->x)[(size_t)t * h + i] = ccoFloatToBfloat16((float)v);
    }
    for (int j = 0; j < k; j++) {
      in->w[t * k + j] = weight_of(rank, iter, t, j);
      in->idx[t * k + j] = expert_of(c, rank, iter, t, j);
    }
    for (int b = 0; b < sc; b++) in->s[t * sc + b] = scale_of(rank, iter, t, b);
  }
}

static void free_inputs(inputs* in) {
  free(in->x);
  free(in->w);
  free(in->s);
  free(in->idx);
}

/* Whether token t of rank s goes to rank d (one of its valid experts lives there). */
static int goes_to(const moe_case* c, const inputs* in, int t, int d) {
  for (int j = 0; j < c->cfg.topk; j++) {
    int32_t e = in->idx[t * c->cfg.topk + j];
    if (e >= 0 && e < nexperts(c) && e / c->cfg.expertsPerRank == d) return 1;
  }
  return 0;
}

typedef struct {
  void *x, *s, *w, *idx, *src, *count, *combIn, *combW;
} regions;

static void get_regions(ccoMoeOp* op, regions* r) {
  OK(ccoMoeRegion(op, ccoMoeRecvTokens, &r->x, NULL));
  OK(ccoMoeRegion(op, ccoMoeRecvScales, &r->s, NULL));
  OK(ccoMoeRegion(op, ccoMoeRecvWeights, &r->w, NULL));
  OK(ccoMoeRegion(op, ccoMoeRecvIndices, &r->idx, NULL));
  OK(ccoMoeRegion(op, ccoMoeRecvSources, &r->src, NULL));
  OK(ccoMoeRegion(op, ccoMoeRecvCount, &r->count, NULL));
  OK(ccoMoeRegion(op, ccoMoeCombineInput, &r->combIn, NULL));
  OK(ccoMoeRegion(op, ccoMoeCombineWeights, &r->combW, NULL));
}

/* The received slots against every rank's inputs. Returns the count. */
static int check_received(const moe_case* c, const regions* r, inputs* all, int expectErrors) {
  int k = c->cfg.topk, h = c->cfg.hidden, sc = fp8(c) ? h / CCO_MOE_SCALE_BLOCK : 0;
  int count = *(const int32_t*)r->count;
  int want = 0;
  for (int s = 0; s < g_size; s++)
    for (int t = 0; t < all[s].n; t++) want += goes_to(c, &all[s], t, g_rank);
  int slots = c->cfg.maxRecvTokens > 0 ? c->cfg.maxRecvTokens : g_size * c->cfg.maxTokensPerRank;
  int expectCount = want < slots ? want : slots;
  MP_CHECK(count == expectCount, "%s: rank %d received %d tokens, expected %d", c->name, g_rank, count, expectCount);
  /* seen[s][t] */
  char** seen = calloc((size_t)g_size, sizeof(char*));
  for (int s = 0; s < g_size; s++) seen[s] = calloc((size_t)all[s].n + 1, 1);
  size_t bad = 0;
  for (int q = 0; q < count && q < slots; q++) {
    const int32_t* src = (const int32_t*)r->src + 2 * q;
    int s = src[0], t = src[1];
    if (s < 0 || s >= g_size || t < 0 || t >= all[s].n || seen[s][t] || !goes_to(c, &all[s], t, g_rank)) {
      if (bad++ < 3)
        fprintf(stderr, "%s: rank %d slot %d holds source (%d, %d): not a token for this rank, or twice\n", c->name,
                g_rank, q, s, t);
      continue;
    }
    seen[s][t] = 1;
    bad += memcmp((const char*)r->x + (size_t)q * token_bytes(c), (const char*)all[s].x + (size_t)t * token_bytes(c),
                  token_bytes(c)) != 0;
    bad += memcmp((const float*)r->w + (size_t)q * k, all[s].w + (size_t)t * k, (size_t)k * sizeof(float)) != 0;
    for (int j = 0; j < k; j++) {
      int32_t e = all[s].idx[t * k + j];
      int32_t want_e = e >= 0 && e < nexperts(c) ? e : -1;
      bad += ((const int32_t*)r->idx)[(size_t)q * k + j] != want_e;
    }
    if (sc) bad += memcmp((const float*)r->s + (size_t)q * sc, all[s].s + (size_t)t * sc, (size_t)sc * sizeof(float)) != 0;
  }
  if (!expectErrors) MP_CHECK(bad == 0, "%s: rank %d: %zu wrong received slots or fields", c->name, g_rank, bad);
  for (int s = 0; s < g_size; s++) free(seen[s]);
  free(seen);
  return count;
}

static void one_case(const moe_case* c) {
  ccoMoeOp* op = NULL;
  ccoResult_t res = ccoMoeCreate(g_comm, &c->cfg, &op);
  MP_CHECK(res == ccoSuccess, "%s: ccoMoeCreate: %s", c->name, ccoGetLastError(g_comm));
  if (res != ccoSuccess) return;
  regions r;
  get_regions(op, &r);
  int h = c->cfg.hidden, k = c->cfg.topk;
  int slots = c->cfg.maxRecvTokens > 0 ? c->cfg.maxRecvTokens : g_size * c->cfg.maxTokensPerRank;
  uint16_t* own = aligned_alloc(64, ((size_t)slots * h * 2 + 64) / 64 * 64);
  float* ownW = malloc(((size_t)slots * k + 1) * sizeof(float));
  size_t wrongOut = 0, wrongW = 0;
  int copies = 0;
  for (int iter = 0; iter < c->iters; iter++) {
    inputs* all = calloc((size_t)g_size, sizeof(inputs));
    for (int s = 0; s < g_size; s++) make_inputs(c, s, iter, &all[s]);
    inputs* in = &all[g_rank];
    int expectFail = (c->route == ROUTE_BAD_ID && g_rank == 0) || (c->cfg.maxRecvTokens > 0 && g_rank == 0);
    res = ccoMoeDispatch(op, in->x, in->w, fp8(c) ? in->s : NULL, in->idx, in->n, NULL);
    if (c->route == ROUTE_BAD_ID && g_rank == 0)
      MP_CHECK(res == ccoInvalidUsage && strstr(ccoGetLastError(g_comm), "outside"),
               "%s: a bad expert id: %s, %s", c->name, ccoGetErrorString(res), ccoGetLastError(g_comm));
    else if (c->cfg.maxRecvTokens > 0 && g_rank == 0)
      MP_CHECK(res == ccoInvalidUsage && strstr(ccoGetLastError(g_comm), "slots"), "%s: overflow: %s, %s", c->name,
               ccoGetErrorString(res), ccoGetLastError(g_comm));
    else
      MP_CHECK(res == ccoSuccess, "%s: dispatch: %s", c->name, ccoGetLastError(g_comm));
    int count = check_received(c, &r, all, expectFail);
    /* The expert. */
    uint16_t* dst = c->copyPath ? own : (uint16_t*)r.combIn;
    for (int q = 0; q < count; q++) {
      const int32_t* src = (const int32_t*)r.src + 2 * q;
      for (int i = 0; i < h; i++)
        dst[(size_t)q * h + i] = ccoFloatToBfloat16((float)(value_of(src[0], iter, src[1], i) * (g_rank + 1)));
      for (int j = 0; j < k; j++) ownW[(size_t)q * k + j] = 2.0f * ((const float*)r.w)[(size_t)q * k + j];
    }
    uint16_t* out = aligned_alloc(64, ((size_t)in->n * h * 2 + 64) / 64 * 64);
    float* outW = malloc(((size_t)in->n * k + 1) * sizeof(float));
    OK(ccoMoeCombine(op, dst, c->combineWeights ? ownW : NULL, out, outW, NULL));
    copies += c->copyPath;
    /* Each token's row times the sum of (d + 1) over its ranks; weights
     * from the owners (dropped choices 0). */
    for (int t = 0; t < in->n; t++) {
      int factor = 0;
      for (int d = 0; d < g_size; d++) factor += goes_to(c, in, t, d) ? d + 1 : 0;
      int lost = c->cfg.maxRecvTokens > 0; /* tokens past rank 0's slots are gone: skip the exact check */
      for (int i = 0; i < h && !lost; i++)
        wrongOut += out[(size_t)t * h + i] != ccoFloatToBfloat16((float)(value_of(g_rank, iter, t, i) * factor));
      for (int j = 0; j < k && !lost; j++) {
        int32_t e = in->idx[t * k + j];
        float want = e >= 0 && e < nexperts(c) ? in->w[t * k + j] * (c->combineWeights ? 2.0f : 1.0f) : 0.0f;
        if (outW[(size_t)t * k + j] != want && wrongW < 3)
          fprintf(stderr, "%s rank %d iter %d token %d choice %d (expert %d): got %g want %g\n", c->name, g_rank, iter,
                  t, j, e, outW[(size_t)t * k + j], want);
        wrongW += outW[(size_t)t * k + j] != want;
      }
    }
    free(out);
    free(outW);
    for (int s = 0; s < g_size; s++) free_inputs(&all[s]);
    free(all);
  }
  MP_CHECK(wrongOut == 0, "%s: rank %d: %zu wrong combined elements", c->name, g_rank, wrongOut);
  MP_CHECK(wrongW == 0, "%s: rank %d: %zu wrong combined weights", c->name, g_rank, wrongW);
  ccoMoeStats st;
  OK(ccoMoeGetStats(op, &st));
  MP_CHECK(st.dispatches == (uint64_t)c->iters && st.combines == (uint64_t)c->iters &&
               st.combineCopies == (uint64_t)copies,
           "%s: stats %llu dispatches, %llu combines, %llu copies (expected %d, %d, %d)", c->name,
           (unsigned long long)st.dispatches, (unsigned long long)st.combines, (unsigned long long)st.combineCopies,
           c->iters, c->iters, copies);
  free(own);
  free(ownW);
  OK(ccoMoeDestroy(op));
}

static ccoMoeConfig config(int hidden, int maxTokens, int epr, int topk, ccoMoeDataType_t dt, ccoMoeMode_t mode) {
  ccoMoeConfig c = ccoMoeConfigDefault();
  c.hidden = hidden;
  c.maxTokensPerRank = maxTokens;
  c.expertsPerRank = epr;
  c.topk = topk;
  c.dispatchType = dt;
  c.mode = mode;
  return c;
}

/* Misuse: refused alike on every rank, so nothing waits; the op stays usable. */
static void test_misuse(void) {
  ccoMoeConfig c = config(64, 8, 2, 2, ccoMoeBfloat16, ccoMoeThroughput);
  ccoMoeConfig bad = c;
  bad.hidden = 60;
  ccoMoeOp* op = NULL;
  MP_CHECK(ccoMoeCreate(g_comm, &bad, &op) == ccoInvalidArgument && strstr(ccoGetLastError(g_comm), "hidden"),
           "hidden 60 refused: %s", ccoGetLastError(g_comm));
  bad = c;
  bad.mode = ccoMoeLowLatency;
  bad.maxTokensPerRank = 129;
  MP_CHECK(ccoMoeCreate(g_comm, &bad, &op) == ccoInvalidArgument, "low latency over 128 tokens refused: %s",
           ccoGetLastError(g_comm));
  bad = c;
  bad.topk = 0;
  MP_CHECK(ccoMoeCreate(g_comm, &bad, &op) == ccoInvalidArgument, "topk 0 refused");
  MP_CHECK(ccoMoeCreate(g_comm, NULL, &op) == ccoInvalidArgument, "NULL config refused");
  /* Another config on one rank: every rank learns it (one rank has
   * nobody to disagree with). */
  if (g_size > 1) {
    bad = c;
    if (g_rank == g_size - 1) bad.expertsPerRank = 3;
    MP_CHECK(ccoMoeCreate(g_comm, &bad, &op) == ccoInvalidUsage && strstr(ccoGetLastError(g_comm), "another config"),
             "a config mismatch refused on every rank: %s", ccoGetLastError(g_comm));
  }
  OK(ccoMoeCreate(g_comm, &c, &op));
  if (!op) return;
  void* combIn = NULL;
  OK(ccoMoeRegion(op, ccoMoeCombineInput, &combIn, NULL));
  uint16_t out[64 * 8];
  MP_CHECK(ccoMoeCombine(op, combIn, NULL, out, NULL, NULL) == ccoInvalidUsage &&
               strstr(ccoGetLastError(g_comm), "no dispatch"),
           "combine before dispatch refused: %s", ccoGetLastError(g_comm));
  MP_CHECK(ccoMoeDispatch(op, NULL, NULL, NULL, NULL, 9, NULL) == ccoInvalidArgument &&
               strstr(ccoGetLastError(g_comm), "numTokens 9"),
           "9 tokens over 8 refused: %s", ccoGetLastError(g_comm));
  MP_CHECK(ccoMoeDispatch(op, NULL, NULL, NULL, NULL, 1, NULL) == ccoInvalidArgument, "NULL tokens refused");
  MP_CHECK(ccoMoeRegion(op, ccoMoeNumRegions, &combIn, NULL) == ccoInvalidArgument, "unknown region refused");
  /* An empty dispatch, then a second one before combining: refused. */
  OK(ccoMoeDispatch(op, NULL, NULL, NULL, NULL, 0, NULL));
  MP_CHECK(ccoMoeDispatch(op, NULL, NULL, NULL, NULL, 0, NULL) == ccoInvalidUsage &&
               strstr(ccoGetLastError(g_comm), "not been combined"),
           "two dispatches in a row refused: %s", ccoGetLastError(g_comm));
  OK(ccoMoeCombine(op, combIn, NULL, out, NULL, NULL));
  OK(ccoMoeDestroy(op));
  MP_CHECK(ccoMoeDestroy(NULL) == ccoSuccess, "destroying NULL is a no-op");
  size_t bytes = 0;
  OK(ccoMoeArenaBytes(&c, g_size, &bytes));
  MP_CHECK(bytes > 0, "arena bytes %zu", bytes);
}

int main(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; i++)
    if (!strcmp(argv[i], "--seed")) g_seed = strtoull(argv[++i], NULL, 10);
  if (ccoCommCreateFromEnv((size_t)1 << 30, &g_comm) != ccoSuccess) {
    fprintf(stderr, "mp_moe: ccoCommCreateFromEnv: %s\n", ccoGetLastError(NULL));
    return 1;
  }
  ccoCommRank(g_comm, &g_rank);
  ccoCommSize(g_comm, &g_size);
  int nodes = 1;
  ccoCommNodeCount(g_comm, &nodes);
  /* The same cases on one host (LSA) and across hosts (the count matrix,
   * the staging and GDA to the other hosts' ranks, LSA inside each). */
  moe_case cases[] = {
      {"random bf16", config(128, 24, 3, 4, ccoMoeBfloat16, ccoMoeThroughput), ROUTE_RANDOM, 4, -1, 0, 0, 0},
      {"random fp8 low latency", config(256, 16, 2, 3, ccoMoeFp8E4M3, ccoMoeLowLatency), ROUTE_RANDOM, 3, -1, 0, 0, 0},
      {"several experts on one rank", config(64, 20, 4, 4, ccoMoeBfloat16, ccoMoeThroughput), ROUTE_SAME_RANK, 3, -1, 0, 0, 0},
      {"a rank with no tokens", config(64, 12, 2, 2, ccoMoeBfloat16, ccoMoeThroughput), ROUTE_RANDOM, 2, 1 % 2, 0, 0, 0},
      {"every token to rank 0, full", config(32, 16, 2, 2, ccoMoeBfloat16, ccoMoeThroughput), ROUTE_ONE_RANK, 2, -1, 1, 0, 0},
      {"dropped choices", config(48, 10, 2, 4, ccoMoeBfloat16, ccoMoeThroughput), ROUTE_DROPS, 2, -1, 0, 0, 0},
      {"copy fallback and combine weights", config(64, 10, 2, 2, ccoMoeBfloat16, ccoMoeThroughput), ROUTE_RANDOM, 2, -1, 0, 1, 1},
      {"a bad expert id", config(32, 8, 2, 2, ccoMoeBfloat16, ccoMoeThroughput), ROUTE_BAD_ID, 2, -1, 1, 0, 0},
  };
  /* Three parts: slots follow the parts' order (the count matrix's prefix over parts). */
  moe_case threeParts = {"three parts", config(64, 30, 2, 3, ccoMoeBfloat16, ccoMoeThroughput), ROUTE_RANDOM, 3, -1, 0, 0, 0};
  threeParts.cfg.parts = 3;
  one_case(&threeParts);
  moe_case overflow = {"overflow", config(32, 16, 1, 1, ccoMoeBfloat16, ccoMoeThroughput), ROUTE_ONE_RANK, 2, -1, 1, 0, 0};
  overflow.cfg.maxRecvTokens = 5;
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) one_case(&cases[i]);
  one_case(&overflow);
  test_misuse();
  if (g_rank == 0) printf("mp_moe: %d host%s\n", nodes, nodes > 1 ? "s" : "");
  OK(ccoCommDestroy(g_comm));
  return mp_finish("mp_moe");
}
