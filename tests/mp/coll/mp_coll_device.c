/*
 * The collectives' device building blocks (cco/cco_coll.h) on the host
 * platform, one process per rank, each "kernel" a launch of CPU-thread
 * blocks (coll_launch.c), every output element checked against a host
 * reference, and the bytes around every output checked untouched.
 *
 *   ccorun -n N mp_coll_device          (N = 2..8; one host)
 *
 * Phases (each rank prints one line per phase):
 *  reduce    one-shot, LL and two-shot all-reduce and reduce-scatter: every
 *            type x operator, counts 1 .. a few thousand, odd counts,
 *            offsets aligned, shifted alike (not to 16 bytes) and shifted
 *            differently, in place and not, 1-4 parts of 1-3 threads;
 *  move      all-gather, all-to-all, broadcast from every root, in place
 *            where the block allows it;
 *  alltoallv uneven counts, zeros included, gaps between blocks;
 *  large     a few calls of about a million elements;
 *  repeat    LL calls back to back (counts and parts changing, no host
 *            barrier, so the epochs cycle), and persistent "kernels" that
 *            call LL, two-shot and one-shot many times in place;
 *  signature ranks that disagree (or one with bad arguments) get
 *            ccoDevInvalid on every rank, with nothing written, and the
 *            next call works;
 *  invalid   arguments every rank sees as bad: ccoDevInvalid, no hang;
 *  failure   rank 0 alone: LL times out, LL and a barrier see the abort
 *            word.
 * No host barrier between the calls of a phase: each block's own barriers
 * are what let a rank rewrite its inputs and read its outputs.
 */
#include <pthread.h>

#include "coll_device_test.h"

int mp_passed, mp_failed;
pthread_mutex_t mp_check_lock = PTHREAD_MUTEX_INITIALIZER;

#define CHECK(...) MP_CHECK_MT(__VA_ARGS__)

/* ------------------------------------------------------------ the rank */

#define DATA_BYTES (40u << 20)
#define SEND_BASE (64u << 10)     /* inputs */
#define RECV_BASE (20u << 20)     /* outputs */
#define TABLE_OFF (39u << 20)     /* all-to-allv tables */
#define MARGIN 64u                /* checked bytes on each side of an output */
#define CANARY 0xa5u
#define MAIN_BARRIERS 16u         /* barriers of the phases; the failure phase uses the next 16 */

static struct {
  ccoComm* comm;
  ccoDevComm dc;
  ccoWindow_t data, scratch;
  unsigned char *dataLocal, *scratchLocal;
  uint64_t scratchBytes; /* one area; the failure phase uses a second one after it */
  int rank, me, n;
  uint32_t call; /* calls so far: the same on every rank */
} R;

/* --------------------------------------------------- inputs, references */

static uint32_t mix(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  return x ^ (x >> 16);
}

static uint32_t hash3(uint32_t a, uint32_t b, uint64_t c) {
  return mix(a * 0x9e3779b9u ^ mix(b + 0x632be5abu) ^ mix((uint32_t)c ^ (uint32_t)(c >> 32) * 0x85ebca6bu));
}

/* Element i of LSA rank r's input in call `call`, as the type's bits.
 * Floats with many mantissa bits (so the order of a sum shows), half
 * types in [-8, 8), int32 over the whole range (sums wrap). */
static uint32_t input_bits(ccoDataType_t dt, int r, uint32_t call, uint64_t i) {
  uint32_t h = hash3((uint32_t)r, call, i);
  switch (dt) {
    case ccoFloat32: return cco_impl_f32_to_bits((float)((int32_t)(h % 200001u) - 100000) * 0.0001234f);
    case ccoBfloat16: return ccoFloatToBfloat16((float)((int32_t)(h % 4096u) - 2048) / 256.0f);
    case ccoFloat16: return ccoFloatToFloat16((float)((int32_t)(h % 4096u) - 2048) / 256.0f);
    default: return h;
  }
}

static float to_float(ccoDataType_t dt, uint32_t bits) {
  if (dt == ccoBfloat16) return ccoBfloat16ToFloat((uint16_t)bits);
  if (dt == ccoFloat16) return ccoFloat16ToFloat((uint16_t)bits);
  return cco_impl_bits_to_f32(bits);
}

/* The reduction of element i over ranks 0..n-1 in rank order: floats in
 * fp32, halves rounded once at the end, int32 wrapping. */
static uint32_t reference(ccoDataType_t dt, ccoRedOp_t op, uint32_t call, uint64_t i) {
  if (dt == ccoInt32) {
    uint32_t acc = input_bits(dt, 0, call, i);
    for (int r = 1; r < R.n; r++) {
      uint32_t x = input_bits(dt, r, call, i);
      if (op == ccoSum) acc += x;
      else if (op == ccoMax) acc = (int32_t)x > (int32_t)acc ? x : acc;
      else acc = (int32_t)x < (int32_t)acc ? x : acc;
    }
    return acc;
  }
  float acc = to_float(dt, input_bits(dt, 0, call, i));
  for (int r = 1; r < R.n; r++) {
    float x = to_float(dt, input_bits(dt, r, call, i));
    acc = op == ccoSum ? acc + x : op == ccoMax ? (x > acc ? x : acc) : (x < acc ? x : acc);
  }
  if (dt == ccoBfloat16) return ccoFloatToBfloat16(acc);
  if (dt == ccoFloat16) return ccoFloatToFloat16(acc);
  return cco_impl_f32_to_bits(acc);
}

static void put(uint64_t off, uint64_t i, ccoDataType_t dt, uint32_t bits) {
  unsigned char* p = R.dataLocal + off + i * ccoDataTypeSize(dt);
  if (ccoDataTypeSize(dt) == 2) {
    uint16_t h = (uint16_t)bits;
    memcpy(p, &h, 2);
  } else {
    memcpy(p, &bits, 4);
  }
}

static uint32_t get(uint64_t off, uint64_t i, ccoDataType_t dt) {
  const unsigned char* p = R.dataLocal + off + i * ccoDataTypeSize(dt);
  if (ccoDataTypeSize(dt) == 2) {
    uint16_t h;
    memcpy(&h, p, 2);
    return h;
  }
  uint32_t w;
  memcpy(&w, p, 4);
  return w;
}

static void write_input(uint64_t off, ccoDataType_t dt, uint32_t call, uint64_t first, uint64_t count) {
  for (uint64_t i = 0; i < count; i++) put(off, i, dt, input_bits(dt, R.me, call, first + i));
}

/* Canaries in the MARGIN bytes on both sides of [off, off + bytes). */
static void guard(uint64_t off, uint64_t bytes) {
  memset(R.dataLocal + off - MARGIN, CANARY, MARGIN);
  memset(R.dataLocal + off + bytes, CANARY, MARGIN);
}

static int bytes_are(uint64_t off, uint64_t bytes, unsigned char v) {
  for (uint64_t i = 0; i < bytes; i++)
    if (R.dataLocal[off + i] != v) return 0;
  return 1;
}

static int guard_ok(uint64_t off, uint64_t bytes) {
  return bytes_are(off - MARGIN, MARGIN, CANARY) && bytes_are(off + bytes, MARGIN, CANARY);
}

/* Counts wrong elements of [off, off + count) against want(i); prints the first. */
typedef uint32_t (*want_fn)(uint64_t i, const void* ctx);

static uint64_t count_bad(const char* what, uint64_t off, ccoDataType_t dt, uint64_t count, want_fn want,
                          const void* ctx) {
  uint64_t bad = 0;
  for (uint64_t i = 0; i < count; i++) {
    uint32_t got = get(off, i, dt), w = want(i, ctx);
    if (got != w && bad++ == 0)
      fprintf(stderr, "rank %d: %s: element %llu of %llu is %#x, want %#x\n", R.rank, what, (unsigned long long)i,
              (unsigned long long)count, got, w);
  }
  return bad;
}

/* ------------------------------------------------------------- calls */

static ccoCollArgs args(uint64_t sendOff, uint64_t recvOff, uint64_t count, ccoDataType_t dt, ccoRedOp_t op) {
  ccoCollArgs a;
  memset(&a, 0, sizeof(a));
  a.sendWin = R.data;
  a.sendOff = sendOff;
  a.recvWin = R.data;
  a.recvOff = recvOff;
  a.count = count;
  a.dtype = (uint32_t)dt;
  a.op = (uint32_t)op;
  a.barrierBase = 0;
  a.scratchWin = R.scratch;
  a.scratchOff = 0;
  a.scratchBytes = R.scratchBytes;
  a.vTableOff = TABLE_OFF;
  return a;
}

/* Shapes of a call, varied from one to the next: parts, threads, offsets. */
typedef struct {
  int parts, threads;
  uint64_t shiftSend, shiftRecv; /* bytes; 0: 16-byte aligned */
} shape;

/* Call k's parts (1-6) and threads per block (1, sometimes 3 or 4), and
 * offsets: variant 0 aligned, 1 shifted alike by one element (vectors
 * after a head), 2 shifted differently (the stores adapt). */
static shape shape_of(uint32_t k, ccoDataType_t dt, int variant) {
  static const int parts[] = {1, 2, 3, 4, 6};
  uint64_t es = ccoDataTypeSize(dt);
  shape s;
  s.parts = parts[k % 5];
  s.threads = k % 7 == 3 ? 3 : k % 11 == 5 ? 4 : 1;
  s.shiftSend = variant == 0 ? 0 : variant == 1 ? es : 3 * es;
  s.shiftRecv = variant == 0 ? 0 : variant == 1 ? es : 5 * es;
  return s;
}

static const char* fn_name(coll_block_fn fn) {
  return fn == ccoDevAllReduceOneShot ? "one-shot" : fn == ccoDevAllReduceLL ? "LL" : fn == ccoDevAllReduceTwoShot ? "two-shot"
         : fn == ccoDevReduceScatter ? "reduce-scatter" : fn == ccoDevAllGather ? "all-gather"
         : fn == ccoDevAlltoAll ? "all-to-all" : fn == ccoDevAlltoAllv ? "all-to-allv" : "broadcast";
}

static const char* dt_name(ccoDataType_t dt) {
  return dt == ccoFloat32 ? "f32" : dt == ccoBfloat16 ? "bf16" : dt == ccoFloat16 ? "f16" : "i32";
}

/* Runs fn and checks the status (every thread of every block agreeing). */
static int run(coll_block_fn fn, const ccoCollArgs* a, const shape* s, ccoDevStatus_t want, const char* what) {
  int st = coll_launch(fn, &R.dc, a, s->parts, s->threads, 1);
  CHECK(st == (int)want, "rank %d: %s %s: status %d (%s), want %s", R.rank, fn_name(fn), what, st,
        st >= 0 ? ccoDevStatusName((ccoDevStatus_t)st) : "threads disagree", ccoDevStatusName(want));
  return st == (int)want;
}

/* --------------------------------------------------------- reductions */

typedef struct {
  ccoDataType_t dt;
  ccoRedOp_t op;
  uint32_t call;
  uint64_t first; /* element index of output 0 in the inputs */
} red_ctx;

static uint32_t want_reduced(uint64_t i, const void* ctx) {
  const red_ctx* c = (const red_ctx*)ctx;
  return reference(c->dt, c->op, c->call, c->first + i);
}

/* Element first + i of rank r's input. */
typedef struct {
  ccoDataType_t dt;
  int r;
  uint32_t call;
  uint64_t first;
} in_ctx;

static uint32_t want_input(uint64_t i, const void* ctx) {
  const in_ctx* c = (const in_ctx*)ctx;
  return input_bits(c->dt, c->r, c->call, c->first + i);
}

/* One all-reduce (fn one of the three) of `count`, checked. */
static void allreduce_once(coll_block_fn fn, ccoDataType_t dt, ccoRedOp_t op, uint64_t count, int inPlace,
                           const shape* s) {
  uint64_t es = ccoDataTypeSize(dt), bytes = count * es;
  uint64_t sendOff = SEND_BASE + s->shiftSend, recvOff = inPlace ? sendOff : RECV_BASE + s->shiftRecv;
  uint32_t call = ++R.call;
  guard(recvOff, bytes);
  if (!inPlace) guard(sendOff, bytes);
  write_input(sendOff, dt, call, 0, count);
  ccoCollArgs a = args(sendOff, recvOff, count, dt, op);
  char what[96];
  snprintf(what, sizeof what, "%s op %d count %llu%s parts %d x %d threads shift %llu/%llu", dt_name(dt), (int)op,
           (unsigned long long)count, inPlace ? " in place" : "", s->parts, s->threads,
           (unsigned long long)s->shiftSend, (unsigned long long)s->shiftRecv);
  if (!run(fn, &a, s, ccoDevSuccess, what)) return;
  red_ctx c = {dt, op, call, 0};
  uint64_t bad = count_bad(what, recvOff, dt, count, want_reduced, &c);
  CHECK(bad == 0, "rank %d: %s %s: %llu elements wrong", R.rank, fn_name(fn), what, (unsigned long long)bad);
  CHECK(guard_ok(recvOff, bytes), "rank %d: %s %s: bytes next to the output changed", R.rank, fn_name(fn), what);
  if (!inPlace) {
    in_ctx ic = {dt, R.me, call, 0};
    CHECK(count_bad(what, sendOff, dt, count, want_input, &ic) == 0, "rank %d: %s %s: the input changed", R.rank,
          fn_name(fn), what);
  }
}

/* Reduce-scatter: mode 0 separate output, 1 the own block of the input,
 * 2 output offset == input offset (the own block too). */
static void reducescatter_once(ccoDataType_t dt, ccoRedOp_t op, uint64_t count, int mode, const shape* s) {
  uint64_t es = ccoDataTypeSize(dt), bytes = count * es, mine = (uint64_t)R.me * bytes;
  uint64_t sendOff = SEND_BASE + s->shiftSend;
  uint64_t recvOff = mode == 0 ? RECV_BASE + s->shiftRecv : mode == 1 ? sendOff + mine : sendOff;
  uint64_t outOff = mode == 0 ? recvOff : sendOff + mine;
  uint32_t call = ++R.call;
  guard(sendOff, bytes * (uint64_t)R.n);
  if (mode == 0) guard(recvOff, bytes);
  write_input(sendOff, dt, call, 0, count * (uint64_t)R.n);
  ccoCollArgs a = args(sendOff, recvOff, count, dt, op);
  char what[96];
  snprintf(what, sizeof what, "%s op %d count %llu mode %d parts %d x %d shift %llu/%llu", dt_name(dt), (int)op,
           (unsigned long long)count, mode, s->parts, s->threads, (unsigned long long)s->shiftSend,
           (unsigned long long)s->shiftRecv);
  if (!run(ccoDevReduceScatter, &a, s, ccoDevSuccess, what)) return;
  red_ctx c = {dt, op, call, (uint64_t)R.me * count};
  uint64_t bad = count_bad(what, outOff, dt, count, want_reduced, &c);
  CHECK(bad == 0, "rank %d: reduce-scatter %s: %llu elements wrong", R.rank, what, (unsigned long long)bad);
  CHECK(guard_ok(sendOff, bytes * (uint64_t)R.n) && (mode != 0 || guard_ok(recvOff, bytes)),
        "rank %d: reduce-scatter %s: bytes next to the buffers changed", R.rank, what);
}

static void phase_reduce(void) {
  static const uint64_t counts[] = {1, 2, 3, 17, 64, 1001, 4099};
  static const coll_block_fn fns[] = {ccoDevAllReduceOneShot, ccoDevAllReduceLL, ccoDevAllReduceTwoShot};
  uint32_t k = 0;
  double t0 = mp_now();
  for (int f = 0; f < 3; f++)
    for (int d = 0; d < 4; d++)
      for (int o = 0; o < 3; o++)
        for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
          for (int inPlace = 0; inPlace < 2; inPlace++)
            for (int v = 0; v < 3; v++, k++) {
              shape s = shape_of(k, (ccoDataType_t)d, v);
              allreduce_once(fns[f], (ccoDataType_t)d, (ccoRedOp_t)o, counts[c], inPlace, &s);
            }
  for (int d = 0; d < 4; d++)
    for (int o = 0; o < 3; o++)
      for (size_t c = 0; c < 5; c++)
        for (int mode = 0; mode < 3; mode++)
          for (int v = 0; v < 3; v++, k++) {
            shape s = shape_of(k, (ccoDataType_t)d, v);
            reducescatter_once((ccoDataType_t)d, (ccoRedOp_t)o, counts[c + 1], mode, &s);
          }
  printf("rank %d: reduce: %u calls in %.2f s\n", R.rank, k, mp_now() - t0);
}

/* ------------------------------------------------------- data movement */

/* All-gather: mode 0 separate input, 1 the input is the own block of the
 * output (its offset differs between ranks), 2 input offset == output
 * offset (the input sits in the own block). */
static void allgather_once(ccoDataType_t dt, uint64_t count, int mode, const shape* s) {
  uint64_t es = ccoDataTypeSize(dt), bytes = count * es, total = bytes * (uint64_t)R.n;
  uint64_t recvOff = RECV_BASE + s->shiftRecv, mine = recvOff + (uint64_t)R.me * bytes;
  uint64_t sendOff = mode == 0 ? SEND_BASE + s->shiftSend : mode == 1 ? mine : recvOff;
  uint32_t call = ++R.call;
  guard(recvOff, total);
  memset(R.dataLocal + recvOff, 0x5a, total); /* every block must be written */
  write_input(mode == 0 ? sendOff : mine, dt, call, 0, count);
  ccoCollArgs a = args(sendOff, recvOff, count, dt, ccoSum);
  char what[96];
  snprintf(what, sizeof what, "%s count %llu mode %d parts %d x %d shift %llu/%llu", dt_name(dt),
           (unsigned long long)count, mode, s->parts, s->threads, (unsigned long long)s->shiftSend,
           (unsigned long long)s->shiftRecv);
  if (!run(ccoDevAllGather, &a, s, ccoDevSuccess, what)) return;
  uint64_t bad = 0;
  for (int r = 0; r < R.n; r++) {
    in_ctx c = {dt, r, call, 0};
    bad += count_bad(what, recvOff + (uint64_t)r * bytes, dt, count, want_input, &c);
  }
  CHECK(bad == 0, "rank %d: all-gather %s: %llu elements wrong", R.rank, what, (unsigned long long)bad);
  CHECK(guard_ok(recvOff, total), "rank %d: all-gather %s: bytes next to the output changed", R.rank, what);
}

/* All-to-all: block d of rank r's input is elements d * count.. of r's
 * input; it lands in block r of rank d's output. */
static void alltoall_once(ccoDataType_t dt, uint64_t count, const shape* s) {
  uint64_t es = ccoDataTypeSize(dt), total = count * es * (uint64_t)R.n;
  uint64_t sendOff = SEND_BASE + s->shiftSend, recvOff = RECV_BASE + s->shiftRecv;
  uint32_t call = ++R.call;
  guard(recvOff, total);
  memset(R.dataLocal + recvOff, 0x5a, total);
  write_input(sendOff, dt, call, 0, count * (uint64_t)R.n);
  ccoCollArgs a = args(sendOff, recvOff, count, dt, ccoSum);
  char what[96];
  snprintf(what, sizeof what, "%s count %llu parts %d x %d shift %llu/%llu", dt_name(dt), (unsigned long long)count,
           s->parts, s->threads, (unsigned long long)s->shiftSend, (unsigned long long)s->shiftRecv);
  if (!run(ccoDevAlltoAll, &a, s, ccoDevSuccess, what)) return;
  uint64_t bad = 0;
  for (int r = 0; r < R.n; r++) {
    in_ctx c = {dt, r, call, (uint64_t)R.me * count};
    bad += count_bad(what, recvOff + (uint64_t)r * count * es, dt, count, want_input, &c);
  }
  CHECK(bad == 0, "rank %d: all-to-all %s: %llu elements wrong", R.rank, what, (unsigned long long)bad);
  CHECK(guard_ok(recvOff, total), "rank %d: all-to-all %s: bytes next to the output changed", R.rank, what);
}

/* Broadcast from `root`, in place (output offset == input offset) or not. */
static void broadcast_once(ccoDataType_t dt, uint64_t count, int root, int inPlace, const shape* s) {
  uint64_t es = ccoDataTypeSize(dt), bytes = count * es;
  uint64_t sendOff = SEND_BASE + s->shiftSend, recvOff = inPlace ? sendOff : RECV_BASE + s->shiftRecv;
  uint32_t call = ++R.call;
  guard(recvOff, bytes);
  memset(R.dataLocal + recvOff, 0x5a, bytes);
  if (R.me == root) write_input(sendOff, dt, call, 0, count);
  ccoCollArgs a = args(sendOff, recvOff, count, dt, ccoSum);
  a.root = root;
  char what[96];
  snprintf(what, sizeof what, "%s count %llu root %d%s parts %d x %d shift %llu/%llu", dt_name(dt),
           (unsigned long long)count, root, inPlace ? " in place" : "", s->parts, s->threads,
           (unsigned long long)s->shiftSend, (unsigned long long)s->shiftRecv);
  if (!run(ccoDevBroadcast, &a, s, ccoDevSuccess, what)) return;
  in_ctx c = {dt, root, call, 0};
  uint64_t bad = count_bad(what, recvOff, dt, count, want_input, &c);
  CHECK(bad == 0, "rank %d: broadcast %s: %llu elements wrong", R.rank, what, (unsigned long long)bad);
  CHECK(guard_ok(recvOff, bytes), "rank %d: broadcast %s: bytes next to the output changed", R.rank, what);
}

static void phase_move(void) {
  static const uint64_t counts[] = {1, 3, 17, 1001, 5000};
  uint32_t k = 0;
  int calls = 0;
  double t0 = mp_now();
  for (int d = 0; d < 4; d++)
    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
      for (int v = 0; v < 3; v++, k++) {
        shape s = shape_of(k, (ccoDataType_t)d, v);
        for (int mode = 0; mode < 3; mode++, calls++) allgather_once((ccoDataType_t)d, counts[c], mode, &s);
        alltoall_once((ccoDataType_t)d, counts[c], &s);
        broadcast_once((ccoDataType_t)d, counts[c], (int)(k % (uint32_t)R.n), (int)(k % 2), &s);
        calls += 2;
      }
  for (int root = 0; root < R.n; root++, k++, calls++) {
    shape s = shape_of(k, ccoBfloat16, root % 3);
    broadcast_once(ccoBfloat16, 333, root, root % 2, &s);
  }
  printf("rank %d: move: %d calls in %.2f s\n", R.rank, calls, mp_now() - t0);
}

/* ---------------------------------------------------------- all-to-allv */

/* Elements rank s sends rank d in call `call`: 0 for about a fifth of the
 * pairs, else 1..maxc. */
static int64_t v_count(int s, int d, uint32_t call, int64_t maxc) {
  uint32_t h = hash3((uint32_t)s * 131u + (uint32_t)d, call, 7);
  return h % 5u == 0 ? 0 : 1 + (int64_t)(h % (uint32_t)maxc);
}

/* Rank s's send displacement for d (a gap of one element between blocks),
 * and the displacement rank d gives sender s (gaps of two). */
static int64_t v_sdispl(int s, int d, uint32_t call, int64_t maxc) {
  int64_t x = 0;
  for (int j = 0; j < d; j++) x += v_count(s, j, call, maxc) + 1;
  return x;
}

static int64_t v_rdispl(int d, int s, uint32_t call, int64_t maxc) {
  int64_t x = 0;
  for (int j = 0; j < s; j++) x += v_count(j, d, call, maxc) + 2;
  return x;
}

static void alltoallv_once(ccoDataType_t dt, int64_t maxc, const shape* s) {
  uint64_t es = ccoDataTypeSize(dt);
  uint64_t sendOff = SEND_BASE + s->shiftSend, recvOff = RECV_BASE + s->shiftRecv;
  uint32_t call = ++R.call;
  int64_t* table = (int64_t*)(void*)(R.dataLocal + TABLE_OFF);
  uint64_t sendTotal = (uint64_t)v_sdispl(R.me, R.n, call, maxc), recvTotal = (uint64_t)v_rdispl(R.me, R.n, call, maxc);
  for (int p = 0; p < R.n; p++) {
    table[p] = v_count(R.me, p, call, maxc);
    table[R.n + p] = v_sdispl(R.me, p, call, maxc);
    table[2 * R.n + p] = v_rdispl(R.me, p, call, maxc);
  }
  write_input(sendOff, dt, call, 0, sendTotal);
  guard(recvOff, recvTotal * es);
  memset(R.dataLocal + recvOff, 0x5a, recvTotal * es); /* the gaps must stay so */
  ccoCollArgs a = args(sendOff, recvOff, 0, dt, ccoSum);
  char what[96];
  snprintf(what, sizeof what, "%s up to %lld a block, parts %d x %d shift %llu/%llu", dt_name(dt), (long long)maxc,
           s->parts, s->threads, (unsigned long long)s->shiftSend, (unsigned long long)s->shiftRecv);
  if (!run(ccoDevAlltoAllv, &a, s, ccoDevSuccess, what)) return;
  uint64_t bad = 0;
  for (int src = 0; src < R.n; src++) {
    int64_t cnt = v_count(src, R.me, call, maxc), rd = v_rdispl(R.me, src, call, maxc);
    in_ctx c = {dt, src, call, (uint64_t)v_sdispl(src, R.me, call, maxc)};
    bad += count_bad(what, recvOff + (uint64_t)rd * es, dt, (uint64_t)cnt, want_input, &c);
    bad += !bytes_are(recvOff + (uint64_t)(rd + cnt) * es, 2 * es, 0x5a);
  }
  CHECK(bad == 0, "rank %d: all-to-allv %s: %llu elements wrong", R.rank, what, (unsigned long long)bad);
  CHECK(guard_ok(recvOff, recvTotal * es), "rank %d: all-to-allv %s: bytes next to the output changed", R.rank, what);
}

static void phase_alltoallv(void) {
  static const int64_t maxcs[] = {1, 5, 37, 1000};
  double t0 = mp_now();
  int calls = 0;
  for (uint32_t k = 0; k < 16; k++, calls++) {
    ccoDataType_t dt = (ccoDataType_t)(k % 4);
    shape s = shape_of(k * 5u, dt, (int)(k % 3));
    alltoallv_once(dt, maxcs[k % 4], &s);
  }
  printf("rank %d: alltoallv: %d calls in %.2f s\n", R.rank, calls, mp_now() - t0);
}

/* ---------------------------------------------------------------- large */

static void phase_large(void) {
  double t0 = mp_now();
  uint64_t per = (1u << 20) / (uint64_t)R.n;
  shape s4 = {4, 1, 0, 0}, s3 = {3, 2, 2, 2}, s2 = {2, 1, 4, 4};
  allreduce_once(ccoDevAllReduceTwoShot, ccoFloat32, ccoSum, (1u << 20) + 3, 0, &s4);
  allreduce_once(ccoDevAllReduceOneShot, ccoBfloat16, ccoMax, (1u << 20) - 1, 1, &s3);
  allreduce_once(ccoDevAllReduceLL, ccoFloat16, ccoSum, CCO_COLL_LL_MAX_BYTES / 2, 0, &s4);
  reducescatter_once(ccoInt32, ccoSum, per + 1, 0, &s2);
  allgather_once(ccoFloat16, per - 1, 1, &s4);
  printf("rank %d: large: 5 calls of about a million elements in %.2f s\n", R.rank, mp_now() - t0);
}

/* --------------------------------------------------------------- repeat */

/* A persistent kernel: `iters` int32 sums in place, one launch. After the
 * first, every rank holds the same values, so each later call multiplies
 * them by the number of ranks; an input read from a stale LL line or too
 * early shows in the result. */
static void persistent(coll_block_fn fn, uint64_t count, int iters, int parts, int threads) {
  uint64_t off = SEND_BASE + 4;
  uint32_t call = ++R.call, factor = 1;
  for (int i = 1; i < iters; i++) factor *= (uint32_t)R.n;
  guard(off, count * 4);
  write_input(off, ccoInt32, call, 0, count);
  ccoCollArgs a = args(off, off, count, ccoInt32, ccoSum);
  int st = coll_launch(fn, &R.dc, &a, parts, threads, iters);
  CHECK(st == ccoDevSuccess, "rank %d: %s, %d calls in one launch: status %d", R.rank, fn_name(fn), iters, st);
  uint64_t bad = 0;
  for (uint64_t i = 0; i < count; i++) bad += get(off, i, ccoInt32) != reference(ccoInt32, ccoSum, call, i) * factor;
  CHECK(bad == 0, "rank %d: %s, %d calls in one launch: %llu elements wrong", R.rank, fn_name(fn), iters,
        (unsigned long long)bad);
  CHECK(guard_ok(off, count * 4), "rank %d: %s persistent: bytes next to the buffer changed", R.rank, fn_name(fn));
}

static void phase_repeat(void) {
  static const uint64_t bytes[] = {4, 28, 1200, 16404, CCO_COLL_LL_MAX_BYTES, 520, 8};
  double t0 = mp_now();
  int calls = 0;
  /* LL back to back: counts, types and parts change from call to call, so
   * chunks are used by different parts and skipped now and then. */
  for (uint32_t k = 0; k < 120; k++, calls++) {
    ccoDataType_t dt = (ccoDataType_t)(k % 4);
    shape s = shape_of(k * 7u, dt, (int)(k % 3));
    uint64_t count = bytes[k % 7] / ccoDataTypeSize(dt);
    allreduce_once(ccoDevAllReduceLL, dt, (ccoRedOp_t)(k % 3), count > 0 ? count : 1, (int)(k % 2), &s);
  }
  persistent(ccoDevAllReduceLL, 5000, 64, 3, 2);
  persistent(ccoDevAllReduceLL, 1, 64, 2, 1);
  persistent(ccoDevAllReduceTwoShot, 20011, 24, 4, 1);
  persistent(ccoDevAllReduceOneShot, 3001, 24, 2, 3);
  calls += 64 + 64 + 24 + 24;
  printf("rank %d: repeat: %d calls in %.2f s\n", R.rank, calls, mp_now() - t0);
}

/* ------------------------------------------------------------ signature */

static const coll_block_fn barrier_fns[] = {ccoDevAllReduceOneShot, ccoDevAllReduceTwoShot, ccoDevAllGather,
                                            ccoDevReduceScatter,    ccoDevAlltoAll,         ccoDevAlltoAllv,
                                            ccoDevBroadcast};
#define N_BARRIER_FNS ((int)(sizeof(barrier_fns) / sizeof(barrier_fns[0])))

/* Arguments valid for any of the barrier blocks: outputs from RECV_BASE,
 * inputs from SEND_BASE, at most 4 x n x count bytes; a table of small
 * counts for all-to-allv. */
static ccoCollArgs valid_args(uint64_t count, uint64_t signature) {
  int64_t* table = (int64_t*)(void*)(R.dataLocal + TABLE_OFF);
  for (int p = 0; p < R.n; p++) {
    table[p] = (int64_t)count;
    table[R.n + p] = (int64_t)count * p;
    table[2 * R.n + p] = (int64_t)count * p;
  }
  ccoCollArgs a = args(SEND_BASE, RECV_BASE, count, ccoFloat32, ccoSum);
  a.signature = signature;
  return a;
}

/* Every rank must return ccoDevInvalid and leave the output area alone. */
static void expect_refused(coll_block_fn fn, const ccoCollArgs* a, const char* what) {
  uint64_t area = 4u * 1024u * (uint64_t)R.n + 2 * MARGIN;
  memset(R.dataLocal + RECV_BASE - MARGIN, 0x5a, area);
  shape s = {3, 2, 0, 0};
  run(fn, a, &s, ccoDevInvalid, what);
  CHECK(bytes_are(RECV_BASE - MARGIN, area, 0x5a), "rank %d: %s %s: the output area was written", R.rank,
        fn_name(fn), what);
}

static void phase_signature(void) {
  double t0 = mp_now();
  shape s = {2, 1, 0, 0};
  for (int f = 0; f < N_BARRIER_FNS; f++) {
    uint64_t sig = 0x5eed0000u + (uint64_t)f;
    /* Rank 0 calls with another count, and so another signature. */
    ccoCollArgs a = valid_args(R.me == 0 ? 1001 : 1000, R.me == 0 ? sig + 1 : sig);
    expect_refused(barrier_fns[f], &a, "ranks with different signatures");
    /* The last rank's arguments are bad where only it can see: its
     * verdict travels with its signature. */
    a = valid_args(1000, sig);
    if (R.me == R.n - 1) {
      if (barrier_fns[f] == ccoDevAlltoAllv) ((int64_t*)(void*)(R.dataLocal + TABLE_OFF))[0] = -1;
      else a.recvOff = DATA_BYTES; /* past the window */
    }
    expect_refused(barrier_fns[f], &a, "one rank with bad arguments, same signature");
    /* The barriers are still in step. */
    a = valid_args(1000, sig);
    run(barrier_fns[f], &a, &s, ccoDevSuccess, "after refused calls");
  }
  /* A signature checked and right: the data is right too. */
  shape s2 = {2, 2, 4, 4};
  R.call++;
  uint32_t call = R.call;
  write_input(SEND_BASE + 4, ccoFloat32, call, 0, 777);
  ccoCollArgs a = args(SEND_BASE + 4, RECV_BASE + 4, 777, ccoFloat32, ccoMin);
  a.signature = 42;
  if (run(ccoDevAllReduceOneShot, &a, &s2, ccoDevSuccess, "with a signature")) {
    red_ctx c = {ccoFloat32, ccoMin, call, 0};
    CHECK(count_bad("signature", RECV_BASE + 4, ccoFloat32, 777, want_reduced, &c) == 0,
          "rank %d: one-shot with a signature: wrong result", R.rank);
  }
  printf("rank %d: signature: %d refused and %d accepted calls in %.2f s\n", R.rank, 2 * N_BARRIER_FNS,
         N_BARRIER_FNS + 1, mp_now() - t0);
}

/* -------------------------------------------------------------- invalid */

static void phase_invalid(void) {
  double t0 = mp_now();
  ccoCollArgs a;
  for (int f = 0; f < N_BARRIER_FNS; f++) {
    a = valid_args(1000, 0);
    a.dtype = 9;
    expect_refused(barrier_fns[f], &a, "unknown type");
    a = valid_args(1000, 0);
    a.count = DATA_BYTES;
    if (barrier_fns[f] == ccoDevAlltoAllv) a.vTableOff = DATA_BYTES - 8;
    expect_refused(barrier_fns[f], &a, "past the window");
    a = valid_args(0, 0);
    shape s = {2, 1, 0, 0};
    if (barrier_fns[f] != ccoDevAlltoAllv) run(barrier_fns[f], &a, &s, ccoDevSuccess, "count 0");
  }
  a = valid_args(1000, 0);
  a.op = 5;
  expect_refused(ccoDevAllReduceTwoShot, &a, "unknown operator");
  expect_refused(ccoDevAllReduceLL, &a, "unknown operator");
  expect_refused(ccoDevReduceScatter, &a, "unknown operator");
  a = valid_args(1000, 0);
  a.recvOff = a.sendOff + 4;
  expect_refused(ccoDevAllReduceOneShot, &a, "input and output overlapping, not equal");
  expect_refused(ccoDevAllReduceLL, &a, "input and output overlapping, not equal");
  a = valid_args(1000, 0);
  a.recvOff = a.sendOff;
  expect_refused(ccoDevAlltoAll, &a, "in place");
  a = valid_args(1000, 0);
  a.root = R.n;
  expect_refused(ccoDevBroadcast, &a, "root out of range");
  a = valid_args(1000, 0);
  a.sendOff += 2; /* not a multiple of the element size */
  expect_refused(ccoDevAllReduceTwoShot, &a, "misaligned element");
  a = valid_args(CCO_COLL_LL_MAX_BYTES / 4 + 1, 0);
  expect_refused(ccoDevAllReduceLL, &a, "larger than LL takes");
  a = valid_args(100, 0);
  a.scratchBytes = ccoDevCollScratchBytes(R.n, 3) - 1;
  expect_refused(ccoDevAllReduceLL, &a, "scratch too small");
  a = valid_args(100, 0);
  a.scratchOff = 8;
  expect_refused(ccoDevAllReduceLL, &a, "scratch misaligned");
  a = valid_args(100, 0);
  a.barrierBase = R.dc.lsaBarrierCount - 2; /* 3 parts need 3 */
  expect_refused(ccoDevAllReduceOneShot, &a, "barriers out of range");
  a = valid_args(100, 7);
  a.scratchWin = NULL;
  expect_refused(ccoDevAllReduceOneShot, &a, "a signature and no scratch");
  /* More parts than the layout has room for: refused at once. */
  a = valid_args(100, 0);
  shape many = {(int)CCO_COLL_MAX_PARTS + 1, 1, 0, 0};
  run(ccoDevAllReduceTwoShot, &a, &many, ccoDevInvalid, "65 parts");
  run(ccoDevAllReduceLL, &a, &many, ccoDevInvalid, "65 parts");
  CHECK(ccoDevCollScratchBytes(R.n, 0) == 0 && ccoDevCollScratchBytes(R.n, CCO_COLL_MAX_PARTS + 1) == 0 &&
            ccoDevCollScratchBytes(R.n, 1) == ccoDevCollScratchBytes(R.n, CCO_COLL_MAX_PARTS),
        "rank %d: ccoDevCollScratchBytes", R.rank);
  printf("rank %d: invalid: refused in %.2f s\n", R.rank, mp_now() - t0);
}

/* -------------------------------------------------------------- failure */

/* Rank 0 alone, on a second scratch area and barriers no other phase
 * uses: nobody answers, so its waits end by the timeout or the abort word. */
static void phase_failure(void) {
  if (R.me != 0) return;
  double t0 = mp_now();
  uint32_t abortWord = 1;
  ccoDevComm aborted = R.dc;
  aborted.abortFlag = (uint64_t)(uintptr_t)&abortWord;
  ccoCollArgs a = valid_args(1000, 0); /* 8 LL chunks: every part waits */
  a.scratchOff = R.scratchBytes;
  a.barrierBase = MAIN_BARRIERS;
  shape s = {2, 2, 0, 0};

  coll_timeout_ns = 200000000ull; /* 0.2 s */
  double t1 = mp_now();
  run(ccoDevAllReduceLL, &a, &s, ccoDevTimeout, "alone, 0.2 s timeout");
  double took = mp_now() - t1;
  CHECK(took >= 0.19 && took < 10, "rank %d: LL timed out after %.2f s, want 0.2 s", R.rank, took);
  a.barrierBase = MAIN_BARRIERS + 2;
  run(ccoDevAllReduceOneShot, &a, &s, ccoDevTimeout, "alone, 0.2 s timeout");
  coll_timeout_ns = 0;

  int st = coll_launch(ccoDevAllReduceLL, &aborted, &a, 2, 2, 1);
  CHECK(st == ccoDevAborted, "rank %d: LL alone with the abort word set: status %d", R.rank, st);
  a.barrierBase = MAIN_BARRIERS + 4;
  st = coll_launch(ccoDevAllReduceTwoShot, &aborted, &a, 2, 2, 1);
  CHECK(st == ccoDevAborted, "rank %d: two-shot alone with the abort word set: status %d", R.rank, st);
  printf("rank %d: failure: timeouts and aborts in %.2f s\n", R.rank, mp_now() - t0);
}

/* ----------------------------------------------------------------- main */

static int setup(void) {
  if (ccoCommCreateFromEnv(0, &R.comm) != ccoSuccess) {
    fprintf(stderr, "ccoCommCreateFromEnv: %s\n", ccoGetLastError(NULL));
    return 0;
  }
  int nodes = 0;
  ccoCommRank(R.comm, &R.rank);
  ccoCommLsaRank(R.comm, &R.me);
  ccoCommLsaSize(R.comm, &R.n);
  ccoCommNodeCount(R.comm, &nodes);
  if (nodes != 1) {
    fprintf(stderr, "rank %d: mp_coll_device runs on one host (%d here)\n", R.rank, nodes);
    return 0;
  }
  ccoDevCommRequirements reqs = CCO_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.lsaBarrierCount = 2 * MAIN_BARRIERS;
  reqs.gdaConnectionType = ccoGdaConnectionNone;
  R.scratchBytes = ccoDevCollScratchBytes(R.n, CCO_COLL_MAX_PARTS);
  void* data = NULL;
  void* scratch = NULL;
  if (ccoDevCommCreate(R.comm, &reqs, &R.dc) != ccoSuccess ||
      ccoWindowRegisterAlloc(R.comm, DATA_BYTES, &R.data, &data) != ccoSuccess ||
      ccoWindowRegisterAlloc(R.comm, 2 * R.scratchBytes, &R.scratch, &scratch) != ccoSuccess) {
    fprintf(stderr, "rank %d: setup: %s\n", R.rank, ccoGetLastError(R.comm));
    return 0;
  }
  R.dataLocal = (unsigned char*)data;
  R.scratchLocal = (unsigned char*)scratch;
  memset(R.scratchLocal, 0, 2 * R.scratchBytes); /* once; the blocks never reset it */
  return ccoBarrierAll(R.comm) == ccoSuccess;
}

int main(void) {
  /* CPU threads move the data: the windows must be host memory. */
  setenv("CCO_PLATFORM", "host", 1);
  int good = setup();
  CHECK(good, "setup");
  if (good) {
    double t0 = mp_now();
    phase_reduce();
    phase_move();
    phase_alltoallv();
    phase_large();
    phase_repeat();
    phase_signature();
    phase_invalid();
    phase_failure();
    CHECK(ccoBarrierAll(R.comm) == ccoSuccess, "rank %d: final barrier", R.rank);
    printf("rank %d: all phases over %d LSA ranks in %.2f s\n", R.rank, R.n, mp_now() - t0);
  }
  if (R.scratch) CHECK(ccoWindowDeregister(R.comm, R.scratch) == ccoSuccess, "deregister");
  if (R.data) CHECK(ccoWindowDeregister(R.comm, R.data) == ccoSuccess, "deregister");
  if (R.dc.magic == CCO_DEV_COMM_MAGIC) CHECK(ccoDevCommDestroy(R.comm, &R.dc) == ccoSuccess, "devcomm destroy");
  if (R.comm) CHECK(ccoCommDestroy(R.comm) == ccoSuccess, "destroy");
  char name[64];
  snprintf(name, sizeof name, "mp_coll_device rank %d", R.rank);
  return mp_finish(name);
}
