/*
 * mp_gda steps "sad" and "get": data checked at the moment its signal or
 * counter says it is there: random-size puts with their signals (bundled
 * or standalone), gets of every size up to several staged chunks, and large
 * puts followed by a standalone signal.
 *
 *  sad      signal after data: a sender thread puts random sizes (0..64 KiB)
 *           to every peer with a signal increment (two slots per pair, each
 *           with its own signal, so a count names one put); every third
 *           block goes as three puts without a signal followed by a
 *           standalone ccoGdaSignal instead; a receiver thread waits for
 *           each signal and checks the whole block at once (a signal ahead
 *           of its data shows as a torn block), then acks with a standalone
 *           signal on another context; I iterations.
 *  get      gets of 0 B .. 5 MiB + 11 (more than one staged chunk, at most
 *           1 MiB, so the staged path splits them) from every peer into
 *           an unaligned destination with guard bytes after it: the counter
 *           says the data is here, checked before the flush; a 1 MiB get
 *           followed by a standalone ccoGdaCounter: once the counter moves
 *           the get's data is here; then a 5 MiB + 11 put to every peer,
 *           checked by the peer at its signal: bundled with the put, then a
 *           standalone ccoGdaSignal posted after it.
 */
#include "gda.h"

/* ------------------------------------------------------------------- sad */

static size_t sad_len(int s, int d, long i) { return (size_t)(key4(0x5ad, (uint64_t)s, (uint64_t)d, (uint64_t)i) % (SAD_SLOT + 1)); }
static uint64_t sad_seed(int s, int d, long i) { return key4(0x5ee, (uint64_t)s, (uint64_t)d, (uint64_t)i); }

typedef struct {
  rank_ctx* c;
  long torn, checked, bytes;
  ccoDevStatus_t st;
} sad_arg;

static void* sad_sender(void* arg) {
  sad_arg* a = arg;
  rank_ctx* c = a->c;
  ccoGda g = ccoGdaHandle(&c->dc, 0, ccoGdaDoorbellImmediate);
  ccoDevStatus_t st = ccoDevSuccess;
  for (long i = 0; i < g_opt.iters && st == ccoDevSuccess; i++)
    for (int k = 0; k < c->nPeers && st == ccoDevSuccess; k++) {
      int p = c->peers[k], slot = (int)(i % SAD_W);
      /* The slot is free again once p acknowledged the put SAD_W before. */
      if (i >= SAD_W) st = ccoGdaWaitSignal(&g, SIG_ACK + (uint32_t)p, (uint64_t)(i - SAD_W + 1), WAIT_NS, ccoCoopBlock);
      if (st != ccoDevSuccess) break;
      size_t n = sad_len(c->rank, p, i);
      size_t src = c->L.sadSend + ((size_t)p * SAD_W + (size_t)slot) * SAD_SLOT;
      fill(c->b + src, n, sad_seed(c->rank, p, i));
      size_t dst = c->L.sadRecv + ((size_t)c->rank * SAD_W + (size_t)slot) * SAD_SLOT;
      ccoGdaSignalSpec sig = ccoGdaSigInc(SIG_SAD + (uint32_t)(c->rank * SAD_W + slot));
      if (i % 3 != 2) {
        st = ccoGdaPut(&g, p, c->winB, dst, c->winB, src, n, sig, CCO_GDA_NO_COUNTER, ccoCoopBlock,
                       ccoGdaThreadAggregate);
      } else {
        /* Three puts without a signal, then a standalone signal: it must
         * come after all three. */
        size_t cut1 = n / 3, cut2 = 2 * n / 3;
        st = ccoGdaPut(&g, p, c->winB, dst, c->winB, src, cut1, ccoGdaSigNone(), CCO_GDA_NO_COUNTER, ccoCoopWarp,
                       ccoGdaThreadAggregate);
        if (st == ccoDevSuccess)
          st = ccoGdaPut(&g, p, c->winB, dst + cut2, c->winB, src + cut2, n - cut2, ccoGdaSigNone(),
                         CCO_GDA_NO_COUNTER, ccoCoopThread, ccoGdaThreadIndependent);
        if (st == ccoDevSuccess)
          st = ccoGdaPut(&g, p, c->winB, dst + cut1, c->winB, src + cut1, cut2 - cut1, ccoGdaSigNone(),
                         CCO_GDA_NO_COUNTER, ccoCoopBlock, ccoGdaThreadAggregate);
        if (st == ccoDevSuccess) st = ccoGdaSignal(&g, p, sig, ccoCoopBlock);
      }
      a->bytes += (long)n;
    }
  if (st == ccoDevSuccess) st = ccoGdaFlush(&g, ccoCoopBlock);
  a->st = st;
  return NULL;
}

static void* sad_receiver(void* arg) {
  sad_arg* a = arg;
  rank_ctx* c = a->c;
  ccoGda data = ccoGdaHandle(&c->dc, 0, ccoGdaDoorbellImmediate);
  ccoGda acks = ccoGdaHandle(&c->dc, 1, ccoGdaDoorbellImmediate);
  ccoDevStatus_t st = ccoDevSuccess;
  for (long i = 0; i < g_opt.iters && st == ccoDevSuccess; i++)
    for (int k = 0; k < c->nPeers && st == ccoDevSuccess; k++) {
      int s = c->peers[k], slot = (int)(i % SAD_W);
      uint32_t sig = SIG_SAD + (uint32_t)(s * SAD_W + slot);
      uint64_t want = (uint64_t)(i / SAD_W) + 1;
      st = ccoGdaWaitSignal(&data, sig, want, WAIT_NS, ccoCoopWarp);
      if (st != ccoDevSuccess) break;
      /* At once: the signal must not be ahead of any byte of its block. */
      size_t n = sad_len(s, c->rank, i);
      const char* got = c->b + c->L.sadRecv + ((size_t)s * SAD_W + (size_t)slot) * SAD_SLOT;
      size_t d = first_diff(got, n, sad_seed(s, c->rank, i));
      uint64_t now = ccoGdaReadSignal(&data, sig);
      a->checked++;
      if (d != n || now != want) {
        if (a->torn++ < 3)
          CHECK(0, "rank %d: sad: iteration %ld from rank %d: %zu B block differs at byte %zu (signal %llu, want %llu)",
                c->rank, i, s, n, d, (unsigned long long)now, (unsigned long long)want);
      }
      st = ccoGdaSignal(&acks, s, ccoGdaSigInc(SIG_ACK + (uint32_t)c->rank), ccoCoopWarp);
    }
  if (st == ccoDevSuccess) st = ccoGdaFlush(&acks, ccoCoopBlock);
  a->st = st;
  return NULL;
}

void test_sad(rank_ctx* c) {
  if (!has_gda(c) || !step_begin(c, "sad", 120)) return;
  double t0 = mp_now();
  sad_arg snd = {c, 0, 0, 0, ccoDevSuccess}, rcv = {c, 0, 0, 0, ccoDevSuccess};
  pthread_t ts, tr;
  pthread_create(&ts, NULL, sad_sender, &snd);
  pthread_create(&tr, NULL, sad_receiver, &rcv);
  pthread_join(ts, NULL);
  pthread_join(tr, NULL);
  double took = elapsed(t0);
  DEV_OK(snd.st, "sad sender");
  DEV_OK(rcv.st, "sad receiver");
  long expected = g_opt.iters * c->nPeers;
  CHECK(rcv.checked == expected && rcv.torn == 0, "rank %d: sad: %ld of %ld blocks checked, %ld torn", c->rank,
        rcv.checked, expected, rcv.torn);
  printf("sad: rank %d: %ld blocks (%.1f MiB, 0..64 KiB each) from %d peers checked at their signal, %ld torn, "
         "in %.2f s\n",
         c->rank, rcv.checked, (double)snd.bytes / 1048576.0, c->nPeers, rcv.torn, took);
  barrier(c);
}

/* ------------------------------------------------------------------- get */

void test_get(rank_ctx* c) {
  if (!has_gda(c) || !step_begin(c, "get", 120)) return;
  static const size_t sizes[] = {0, 1, 8, 4093, 65536 + 5, (1u << 20) + 3, BIG_BYTES};
  const int nSizes = (int)(sizeof(sizes) / sizeof(sizes[0]));
  ccoGda g = ccoGdaHandle(&c->dc, 0, ccoGdaDoorbellImmediate);
  uint64_t count = 0;
  double bigTime = 0;
  long bigN = 0;
  for (int i = 0; i < c->nPeers; i++) {
    int p = c->peers[i];
    for (int z = 0; z < nSizes; z++) {
      size_t n = sizes[z], off = 8u * (size_t)((p * 131 + z * 977) % 1024), dst = c->L.big + (size_t)(z % 5);
      memset(c->b + c->L.big, 0xee, n + 64);
      double t = mp_now();
      ccoDevStatus_t st =
          ccoGdaGet(&g, p, c->winB, dst, c->winA, off, n, CNT_GET, kCoops[z % 3], ccoGdaThreadAggregate);
      if (!DEV_OK(st, "ccoGdaGet")) continue;
      count++;
      /* The counter counts arrival: the data is here before any flush. */
      if (!DEV_OK(ccoGdaWaitCounter(&g, CNT_GET, count, WAIT_NS, ccoCoopBlock), "ccoGdaWaitCounter")) continue;
      if (n == BIG_BYTES) bigTime += elapsed(t), bigN++;
      size_t d = first_diff(c->b + dst, n, seed_at(p, off));
      int guard = 1;
      for (size_t k = 0; k < 64 - (size_t)(z % 5); k++) guard &= (uint8_t)c->b[dst + n + k] == 0xee;
      CHECK(d == n && guard, "rank %d: get of %zu B from rank %d at offset %zu: differs at byte %zu%s", c->rank, n,
            p, off, d, guard ? "" : ", bytes after the end overwritten");
    }
  }
  DEV_OK(ccoGdaFlush(&g, ccoCoopBlock), "ccoGdaFlush");
  uint64_t got = ccoGdaReadCounter(&g, CNT_GET);
  CHECK(got == count, "rank %d: get counter %llu, expected %llu", c->rank, (unsigned long long)got,
        (unsigned long long)count);
  /* A standalone counter comes after every op before it on the context:
   * once it moves, a get posted before it (without a counter) is here. */
  for (int i = 0; i < c->nPeers; i++) {
    int p = c->peers[i];
    size_t n = (1u << 20) + 3, off = 8u * (size_t)(p * 53 + 5), dst = c->L.big + 1;
    memset(c->b + c->L.big, 0xee, n + 64);
    if (!DEV_OK(ccoGdaGet(&g, p, c->winB, dst, c->winA, off, n, CCO_GDA_NO_COUNTER, ccoCoopBlock,
                          ccoGdaThreadAggregate),
                "ccoGdaGet"))
      continue;
    DEV_OK(ccoGdaCounter(&g, p, CNT_OP, ccoCoopWarp), "ccoGdaCounter");
    if (!DEV_OK(ccoGdaWaitCounter(&g, CNT_OP, (uint64_t)i + 1, WAIT_NS, ccoCoopBlock), "ccoGdaWaitCounter")) continue;
    size_t d = first_diff(c->b + dst, n, seed_at(p, off));
    CHECK(d == n, "rank %d: get of %zu B from rank %d not there when the counter after it moved (byte %zu)", c->rank,
          n, p, d);
  }
  DEV_OK(ccoGdaFlush(&g, ccoCoopBlock), "ccoGdaFlush");
  barrier(c);
  /* A large put to every peer: first with its signal bundled, then (after
   * the peers checked it) without one, followed by a standalone signal,
   * which must wait for the whole put (chunked on the staged path). */
  double t0 = mp_now();
  for (int phase = 0; phase < 2; phase++) {
    for (int i = 0; i < c->nPeers; i++) {
      int p = c->peers[i];
      size_t off = 8u * (size_t)((c->rank * 37 + p * 11 + phase * 401) % 1024);
      ccoGdaSignalSpec sig = ccoGdaSigInc(SIG_BIG + (uint32_t)c->rank);
      DEV_OK(ccoGdaPut(&g, p, c->winB, c->L.bigPut + (size_t)c->rank * BIG_SLOT, c->winA, off, BIG_BYTES,
                       phase ? ccoGdaSigNone() : sig, CNT_BIG, ccoCoopBlock, ccoGdaThreadAggregate),
             "ccoGdaPut (large)");
      if (phase) DEV_OK(ccoGdaSignal(&g, p, sig, ccoCoopBlock), "ccoGdaSignal (after the large put)");
    }
    for (int i = 0; i < c->nPeers; i++) {
      int s = c->peers[i];
      if (!DEV_OK(ccoGdaWaitSignal(&g, SIG_BIG + (uint32_t)s, (uint64_t)phase + 1, WAIT_NS, ccoCoopBlock),
                  "ccoGdaWaitSignal (large)"))
        continue;
      size_t off = 8u * (size_t)((s * 37 + c->rank * 11 + phase * 401) % 1024);
      size_t d = first_diff(c->b + c->L.bigPut + (size_t)s * BIG_SLOT, BIG_BYTES, seed_at(s, off));
      CHECK(d == BIG_BYTES, "rank %d: large put from rank %d (signal %s) differs at byte %zu", c->rank, s,
            phase ? "standalone" : "bundled", d);
    }
    DEV_OK(ccoGdaWaitCounter(&g, CNT_BIG, (uint64_t)(phase + 1) * (uint64_t)c->nPeers, WAIT_NS, ccoCoopBlock),
           "ccoGdaWaitCounter (large)");
    DEV_OK(ccoGdaFlush(&g, ccoCoopBlock), "ccoGdaFlush");
    barrier(c); /* nobody overwrites a block its peer still checks */
  }
  double putTime = elapsed(t0);
  if (c->rank == 0)
    printf("get: sizes 0 B .. %u B from %d peers verified (counter %llu); %ld gets of %.1f MiB at %.0f MiB/s; "
           "%d large puts with signals (bundled, then standalone) verified in %.2f s\n",
           BIG_BYTES, c->nPeers, (unsigned long long)got, bigN, BIG_BYTES / 1048576.0,
           bigTime > 0 ? (double)bigN * BIG_BYTES / 1048576.0 / bigTime : 0.0, 2 * c->nPeers, putTime);
  barrier(c);
}
