/*
 * What the files of mp_gda share: the options, the rank's state (its
 * communicator, device communicator, peers and windows), the slots of
 * signals, counters and window B that the steps divide among themselves,
 * the check macros and the helpers of common.c. main.c says what the
 * program does; each other file holds one or two steps.
 */
#ifndef CCO_TESTS_MP_GDA_GDA_H_
#define CCO_TESTS_MP_GDA_GDA_H_

#include <pthread.h>

#include "cco/cco_gda.h"
#define MP_UTIL_SHARED_COUNTS /* the counters live in common.c */
#include "../mp_pattern.h"
#include "../mp_util.h"

#define MAX_RANKS 16
#define NS_PER_S 1000000000ull
#define WAIT_NS (30ull * NS_PER_S) /* device waits: a lost signal fails instead of hanging */

/* Signal slots of the main device communicator (gdaSignalCount = NSIGNALS);
 * "+ s" is the source rank, so every pair has slots of its own. */
#define NSIGNALS 192
#define SIG_OPS 0              /* ops: +1 per put */
#define SIG_VAL 16             /* ops: put-value adds */
#define SIG_STAND 32           /* ops: standalone signals */
#define SIG_FLUSH 48           /* flush */
#define SIG_BIG 64             /* get step: the large put */
#define SIG_ACK 80             /* sad: acks from receiver s */
#define SIG_SAD 96             /* sad: [source][SAD_W] */
#define SIG_KILL 160           /* kill mode: signals of the streamed puts */
#define SIG_NEVER 176          /* nobody signals it */
#define NCOUNTERS 16
#define CNT_PUT 0
#define CNT_VAL 1
#define CNT_GET 2
#define CNT_OP 3
#define CNT_FLUSH 4
#define CNT_BIG 5
#define NCONTEXTS 4
#define RAIL_BARRIERS 2
#define WORLD_BARRIERS 2

/* Sizes of the areas of window B. */
#define NCOMBOS 18           /* scope x thread mode x doorbell mode */
#define OPS_SLOT 4096u
#define SAD_W 2              /* puts in flight per (source, target) */
#define SAD_SLOT 65536u      /* random sizes 0..SAD_SLOT inclusive */
#define BIG_BYTES ((5u << 20) + 11u)
#define BIG_SLOT ((5u << 20) + 4096u)
#define BAR_SLOT 4096u
#define FLOOD_T 4
#define KILL_BYTES (256u << 10)

typedef struct {
  const char* only;
  const char* kill; /* NULL, "host" or "rank" */
  int idle;         /* kill mode: nothing in flight when the victims die */
  uint32_t conn;
  long iters; /* sad iterations per peer */
  long flood; /* ops per flood thread */
  uint32_t tc; /* gdaTrafficClass of the main device communicator */
  int probe;
} options;

extern options g_opt;

#define CHECK(...) MP_CHECK_MT(__VA_ARGS__)

/* Calls that must work: counted only when they fail. */
#define MUST(call)                                                                                  \
  do {                                                                                              \
    ccoResult_t r_ = (call);                                                                        \
    if (r_ != ccoSuccess)                                                                           \
      CHECK(0, "rank %d: %s: %s (%s)", c->rank, #call, ccoGetErrorString(r_), ccoGetLastError(c->comm)); \
  } while (0)

/* A device status that must be ccoDevSuccess: a failure is counted and
 * printed with its line; returns whether it succeeded. */
#define DEV_OK(st, ...) dev_ok_((st), c->rank, __LINE__, __VA_ARGS__)

/* Window B, registered after the device communicator: offsets of its areas. */
typedef struct {
  size_t opsRecv;   /* [combo][source] OPS_SLOT: ops puts */
  size_t opsVals;   /* [combo][source][4] 8 B: put-values */
  size_t opsGet;    /* [combo][peer] OPS_SLOT: ops gets */
  size_t sadSend;   /* [peer][SAD_W] SAD_SLOT: sad sources */
  size_t sadRecv;   /* [source][SAD_W] SAD_SLOT */
  size_t big;       /* get destination with guard bytes */
  size_t bigPut;    /* [source] BIG_SLOT */
  size_t bar;       /* [parity][source] BAR_SLOT */
  size_t world;     /* [parity][source] BAR_SLOT, for the world barrier */
  size_t flushRecv; /* [source][3] OPS_SLOT */
  size_t flood;     /* [source][FLOOD_T] 64 B */
  size_t floodVal;  /* [source][FLOOD_T] 8 B */
  size_t floodGet;  /* [FLOOD_T] 64 B */
  size_t kill;      /* [source] 256 KiB */
  size_t total;
} layout;

typedef struct {
  ccoComm* comm;
  ccoDevComm dc;
  int rank, nRanks, nNodes;
  int nodeOf[MAX_RANKS], lsaOf[MAX_RANKS];
  int peers[MAX_RANKS], nPeers; /* ranks this one has endpoints to (itself too under FULL) */
  ccoWindow_t winA, winB;
  char *a, *b; /* local views */
  layout L;
} rank_ctx;

/* Window A of rank r holds fill(seed_a(r)) over its size. */
static inline uint64_t seed_a(int r) { return key4(0xa11, (uint64_t)r, 0, 0); }
/* Seed of the slice of rank r's window A at byte offset off (a multiple of 8). */
static inline uint64_t seed_at(int r, size_t off) { return seed_a(r) + off / 8; }

static inline int has_gda(const rank_ctx* c) { return c->dc.gda != 0; }
static inline double elapsed(double t0) { return mp_now() - t0; }

/* The scopes, in the order the steps cycle through them. */
extern const ccoCoop_t kCoops[3];

/* common.c */
int dev_ok_(ccoDevStatus_t st, int rank, int line, const char* what);
int barrier(rank_ctx* c);
int expect_peer(const rank_ctx* c, int a, int b);
void watchdog_start(rank_ctx* c);
void watchdog_arm(const char* step, double limit);
void watchdog_forget_comm(void);
int step_selected(const char* name);
int step_begin(rank_ctx* c, const char* name, double limit);

/* The steps, in the order main runs them. */
void test_ops(rank_ctx* c);           /* ops.c */
void test_atomic(rank_ctx* c);        /* ops.c */
void test_sad(rank_ctx* c);           /* transfer.c */
void test_get(rank_ctx* c);           /* transfer.c */
void test_flush(rank_ctx* c);         /* flush.c */
void test_barrier(rank_ctx* c);       /* barrier.c */
void test_world_barrier(rank_ctx* c); /* barrier.c */
void test_flood(rank_ctx* c);         /* flood.c */
void test_conn(rank_ctx* c);          /* conn.c */
void test_tclass(rank_ctx* c);        /* tclass.c */
void test_drain(rank_ctx* c);         /* drain.c */
void run_kill(rank_ctx* c);           /* kill.c */

#endif /* CCO_TESTS_MP_GDA_GDA_H_ */
