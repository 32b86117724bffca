/* The collectives' choices (src/coll/coll_select.c): CCO_ALGO's grammar,
 * the algorithm by size and LSA size, parts per call, the call signature. */
#include <string.h>

#include "coll/coll.h"
#include "test.h"

static ccoAlgo_t pick(const cco_coll_config* cfg, cco_coll_kind kind, size_t bytes, int lsaSize) {
  ccoAlgo_t a = ccoNumAlgos;
  char why[320];
  if (cco_coll_select(cfg, kind, bytes, lsaSize, 1, &a, why, sizeof(why)) != ccoSuccess) return ccoNumAlgos;
  return a;
}

TEST(config_grammar) {
  cco_coll_config c;
  char why[320];
  CHECK_EQ(cco_coll_config_parse("", &c, why, sizeof(why)), ccoSuccess);
  for (int k = 0; k < CCO_COLL_KINDS; k++) CHECK_EQ(c.forced[k], ccoAlgoAuto);
  CHECK_EQ(cco_coll_config_parse("auto", &c, why, sizeof(why)), ccoSuccess);
  CHECK_EQ(c.forced[CCO_COLL_ALLREDUCE], ccoAlgoAuto);
  CHECK_EQ(cco_coll_config_parse("ll", &c, why, sizeof(why)), ccoSuccess);
  for (int k = 0; k < CCO_COLL_KINDS; k++) CHECK_EQ(c.forced[k], ccoAlgoLL);
  CHECK_EQ(cco_coll_config_parse("allreduce=twoshot,allgather=push", &c, why, sizeof(why)), ccoSuccess);
  CHECK_EQ(c.forced[CCO_COLL_ALLREDUCE], ccoAlgoTwoShot);
  CHECK_EQ(c.forced[CCO_COLL_ALLGATHER], ccoAlgoPush);
  CHECK_EQ(c.forced[CCO_COLL_BROADCAST], ccoAlgoAuto);
  /* A later item overrides an earlier one. */
  CHECK_EQ(cco_coll_config_parse("pull,broadcast=auto", &c, why, sizeof(why)), ccoSuccess);
  CHECK_EQ(c.forced[CCO_COLL_REDUCESCATTER], ccoAlgoPull);
  CHECK_EQ(c.forced[CCO_COLL_BROADCAST], ccoAlgoAuto);
  /* Refused, naming the bad word; the output stays untouched. */
  c.forced[0] = ccoAlgoHier;
  CHECK_EQ(cco_coll_config_parse("fast", &c, why, sizeof(why)), ccoInvalidUsage);
  CHECK(strstr(why, "'fast'") != NULL);
  CHECK_EQ(c.forced[0], ccoAlgoHier);
  CHECK_EQ(cco_coll_config_parse("allshuffle=ll", &c, why, sizeof(why)), ccoInvalidUsage);
  CHECK(strstr(why, "'allshuffle'") != NULL);
  CHECK_EQ(cco_coll_config_parse("allreduce=", &c, why, sizeof(why)), ccoInvalidUsage);
  CHECK_EQ(cco_coll_config_parse("ll,", &c, why, sizeof(why)), ccoSuccess);
}

TEST(names) {
  CHECK_STR(cco_coll_kind_name(CCO_COLL_REDUCESCATTER), "reducescatter");
  CHECK_STR(cco_coll_api_name(CCO_COLL_ALLTOALL), "ccoAlltoAll");
  CHECK_EQ(cco_coll_kind_from_name("broadcast"), CCO_COLL_BROADCAST);
  CHECK_EQ(cco_coll_kind_from_name("Broadcast"), -1);
  CHECK_EQ(cco_coll_kind_from_name(NULL), -1);
  CHECK_STR(cco_coll_algo_name(ccoAlgoTwoShot), "twoshot");
  CHECK_STR(cco_coll_algo_name((ccoAlgo_t)99), "?");
  CHECK(cco_coll_has_algo(CCO_COLL_ALLREDUCE, ccoAlgoLL));
  CHECK(!cco_coll_has_algo(CCO_COLL_ALLGATHER, ccoAlgoLL));
  CHECK(!cco_coll_has_algo(CCO_COLL_ALLREDUCE, ccoAlgoAuto));
  /* Every collective has a building block for each of its algorithms. */
  for (int k = 0; k < CCO_COLL_KINDS; k++)
    for (int a = 1; a < ccoNumAlgos; a++)
      CHECK_EQ(cco_coll_has_algo((cco_coll_kind)k, (ccoAlgo_t)a), cco_coll_block_index((cco_coll_kind)k, (ccoAlgo_t)a) >= 0);
}

TEST(automatic_choice) {
  /* All-reduce: LL when small, one-shot up to 512 KiB while (lsaSize - 1) x bytes <= 2 MiB, then
   * two-shot. */
  CHECK_EQ(pick(NULL, CCO_COLL_ALLREDUCE, 8, 2), ccoAlgoLL);
  CHECK_EQ(pick(NULL, CCO_COLL_ALLREDUCE, 64 << 10, 8), ccoAlgoLL);
  CHECK_EQ(pick(NULL, CCO_COLL_ALLREDUCE, (64 << 10) + 4, 8), ccoAlgoOneShot);
  CHECK_EQ(pick(NULL, CCO_COLL_ALLREDUCE, 512 << 10, 2), ccoAlgoOneShot);
  CHECK_EQ(pick(NULL, CCO_COLL_ALLREDUCE, (512 << 10) + 4, 2), ccoAlgoTwoShot);
  CHECK_EQ(pick(NULL, CCO_COLL_ALLREDUCE, 1 << 20, 2), ccoAlgoTwoShot);
  CHECK_EQ(pick(NULL, CCO_COLL_ALLREDUCE, 512 << 10, 4), ccoAlgoOneShot);
  CHECK_EQ(pick(NULL, CCO_COLL_ALLREDUCE, 256 << 10, 8), ccoAlgoOneShot);
  CHECK_EQ(pick(NULL, CCO_COLL_ALLREDUCE, 400 << 10, 8), ccoAlgoTwoShot);
  /* One rank: nothing to exchange; one-shot (a copy) at any size. */
  CHECK_EQ(pick(NULL, CCO_COLL_ALLREDUCE, 8, 1), ccoAlgoOneShot);
  CHECK_EQ(pick(NULL, CCO_COLL_ALLREDUCE, 1 << 30, 1), ccoAlgoOneShot);
  CHECK_EQ(pick(NULL, CCO_COLL_ALLGATHER, 1 << 20, 4), ccoAlgoPush);
  CHECK_EQ(pick(NULL, CCO_COLL_REDUCESCATTER, 1 << 20, 4), ccoAlgoPull);
  CHECK_EQ(pick(NULL, CCO_COLL_ALLTOALL, 1 << 20, 4), ccoAlgoPush);
  CHECK_EQ(pick(NULL, CCO_COLL_BROADCAST, 1 << 20, 4), ccoAlgoPull);
}

TEST(forced_and_refused) {
  cco_coll_config c;
  char why[320];
  ccoAlgo_t a = ccoAlgoAuto;
  CHECK_EQ(cco_coll_config_parse("allreduce=twoshot", &c, why, sizeof(why)), ccoSuccess);
  CHECK_EQ(pick(&c, CCO_COLL_ALLREDUCE, 8, 4), ccoAlgoTwoShot);
  CHECK_EQ(pick(&c, CCO_COLL_ALLGATHER, 8, 4), ccoAlgoPush);
  /* A bare name: used where it can be, the automatic choice elsewhere. */
  CHECK_EQ(cco_coll_config_parse("ll", &c, why, sizeof(why)), ccoSuccess);
  CHECK(!c.demanded[CCO_COLL_ALLREDUCE]);
  CHECK_EQ(pick(&c, CCO_COLL_ALLREDUCE, 48 << 10, 4), ccoAlgoLL);
  CHECK_EQ(pick(&c, CCO_COLL_ALLREDUCE, 1 << 30, 4), ccoAlgoTwoShot);
  CHECK_EQ(pick(&c, CCO_COLL_ALLGATHER, 8, 4), ccoAlgoPush);
  CHECK_EQ(cco_coll_config_parse("oneshot", &c, why, sizeof(why)), ccoSuccess);
  CHECK_EQ(pick(&c, CCO_COLL_ALLREDUCE, 1 << 30, 4), ccoAlgoOneShot);
  CHECK_EQ(pick(&c, CCO_COLL_BROADCAST, 8, 4), ccoAlgoPull);
  /* Named for a collective: refused where it cannot be used. */
  CHECK_EQ(cco_coll_config_parse("ll,allgather=ll,allreduce=ll", &c, why, sizeof(why)), ccoSuccess);
  CHECK(c.demanded[CCO_COLL_ALLGATHER] && c.demanded[CCO_COLL_ALLREDUCE] && !c.demanded[CCO_COLL_BROADCAST]);
  CHECK_EQ(cco_coll_select(&c, CCO_COLL_ALLGATHER, 8, 4, 1, &a, why, sizeof(why)), ccoInvalidUsage);
  CHECK(strstr(why, "allgather=ll") != NULL && strstr(why, "does not have") != NULL && strstr(why, "push") != NULL);
  CHECK_EQ(a, ccoAlgoAuto); /* untouched on failure */
  CHECK_EQ(cco_coll_select(&c, CCO_COLL_ALLREDUCE, 1 << 30, 4, 1, &a, why, sizeof(why)), ccoInvalidUsage);
  CHECK(strstr(why, "largest") != NULL);
  CHECK_EQ(pick(&c, CCO_COLL_ALLREDUCE, 1024, 4), ccoAlgoLL);
  CHECK_EQ(pick(&c, CCO_COLL_BROADCAST, 1024, 4), ccoAlgoPull);
  /* kind=auto undoes a demand. */
  CHECK_EQ(cco_coll_config_parse("allgather=ll,allgather=auto", &c, why, sizeof(why)), ccoSuccess);
  CHECK(!c.demanded[CCO_COLL_ALLGATHER]);
  CHECK_EQ(pick(&c, CCO_COLL_ALLGATHER, 8, 4), ccoAlgoPush);
}

/* Across hosts: every collective is hier whatever the size; CCO_ALGO's
 * one-host algorithms are preferences it ignores there and demands it
 * refuses; hier is refused on one host. */
TEST(several_hosts) {
  cco_coll_config c;
  char why[320];
  ccoAlgo_t a = ccoAlgoAuto;
  for (size_t bytes = 1; bytes <= ((size_t)1 << 30); bytes <<= 5) {
    CHECK_EQ(cco_coll_select(NULL, CCO_COLL_ALLREDUCE, bytes, 4, 2, &a, why, sizeof(why)), ccoSuccess);
    CHECK_EQ(a, ccoAlgoHier);
  }
  CHECK_EQ(cco_coll_select(NULL, CCO_COLL_ALLREDUCE, 8, 1, 3, &a, why, sizeof(why)), ccoSuccess);
  CHECK_EQ(a, ccoAlgoHier);
  CHECK(cco_coll_has_algo(CCO_COLL_ALLREDUCE, ccoAlgoHier));
  CHECK(strstr(cco_coll_algo_list(CCO_COLL_ALLREDUCE), "hier") != NULL);
  CHECK_EQ(cco_coll_config_parse("ll", &c, why, sizeof(why)), ccoSuccess);
  CHECK_EQ(cco_coll_select(&c, CCO_COLL_ALLREDUCE, 1024, 2, 2, &a, why, sizeof(why)), ccoSuccess);
  CHECK_EQ(a, ccoAlgoHier);
  CHECK_EQ(cco_coll_config_parse("allreduce=oneshot", &c, why, sizeof(why)), ccoSuccess);
  a = ccoAlgoAuto;
  CHECK_EQ(cco_coll_select(&c, CCO_COLL_ALLREDUCE, 1024, 2, 2, &a, why, sizeof(why)), ccoInvalidUsage);
  CHECK(strstr(why, "allreduce=oneshot") != NULL && strstr(why, "inside one host") != NULL);
  CHECK_EQ(a, ccoAlgoAuto);
  CHECK_EQ(cco_coll_config_parse("allreduce=hier", &c, why, sizeof(why)), ccoSuccess);
  CHECK_EQ(cco_coll_select(&c, CCO_COLL_ALLREDUCE, 1024, 2, 2, &a, why, sizeof(why)), ccoSuccess);
  CHECK_EQ(a, ccoAlgoHier);
  CHECK_EQ(cco_coll_select(&c, CCO_COLL_ALLREDUCE, 1024, 2, 1, &a, why, sizeof(why)), ccoInvalidUsage);
  CHECK(strstr(why, "span hosts") != NULL);
  CHECK_EQ(cco_coll_config_parse("hier", &c, why, sizeof(why)), ccoSuccess);
  CHECK_EQ(pick(&c, CCO_COLL_ALLREDUCE, 1024, 2), ccoAlgoLL); /* a preference one host cannot use */
  CHECK_EQ(cco_coll_select(NULL, CCO_COLL_ALLGATHER, 8, 4, 2, &a, why, sizeof(why)), ccoSuccess);
  CHECK_EQ(a, ccoAlgoHier);
  CHECK_EQ(cco_coll_select(NULL, CCO_COLL_BROADCAST, 1 << 20, 1, 2, &a, why, sizeof(why)), ccoSuccess);
  CHECK_EQ(a, ccoAlgoHier);
  CHECK_EQ(pick(NULL, CCO_COLL_ALLGATHER, 8, 4), ccoAlgoPush); /* one host is unchanged */
  CHECK_EQ(pick(NULL, CCO_COLL_BROADCAST, 8, 4), ccoAlgoPull);
  CHECK_EQ(cco_coll_select(NULL, CCO_COLL_REDUCESCATTER, 8, 2, 3, &a, why, sizeof(why)), ccoSuccess);
  CHECK_EQ(a, ccoAlgoHier);
  CHECK_EQ(cco_coll_select(NULL, CCO_COLL_ALLTOALL, 8, 2, 2, &a, why, sizeof(why)), ccoSuccess);
  CHECK_EQ(a, ccoAlgoHier);
  CHECK_EQ(pick(NULL, CCO_COLL_ALLTOALL, 8, 2), ccoAlgoPush);
}

TEST(parts) {
  CHECK_EQ(cco_coll_default_parts(CCO_PLATFORM_HOST, 0), 2u);
  CHECK_EQ(cco_coll_default_parts(CCO_PLATFORM_CUDA, 0), 16u);
  CHECK_EQ(cco_coll_default_parts(CCO_PLATFORM_CUDA, 3), 3u);
  CHECK(cco_coll_default_parts(CCO_PLATFORM_CUDA, 1 << 20) <= 4096u);
  CHECK(cco_coll_default_parts(CCO_PLATFORM_HOST, -5) == 2u);
}

TEST(shared_gpu_parts) {
  /* One rank on its GPU: the whole room. */
  CHECK_EQ(cco_coll_shared_gpu_parts(132, 1), 132);
  /* 132 SMs, one block each: 2 and 4 ranks keep 16 parts, 8 ranks get 8
   * (16 each hung behind a late rank's GEMM). */
  CHECK(cco_coll_shared_gpu_parts(132, 2) >= 16);
  CHECK_EQ(cco_coll_shared_gpu_parts(132, 4), 16);
  CHECK_EQ(cco_coll_shared_gpu_parts(132, 8), 8);
  /* Two blocks per SM: still at most 64 waiting blocks in all. */
  CHECK_EQ(cco_coll_shared_gpu_parts(264, 8), 8);
  CHECK_EQ(cco_coll_shared_gpu_parts(264, 16), 4);
  /* A small GPU: half its room. */
  CHECK_EQ(cco_coll_shared_gpu_parts(40, 4), 5);
  /* Not even one block each: 0 (the caller refuses). */
  CHECK_EQ(cco_coll_shared_gpu_parts(132, 128), 0);
  CHECK_EQ(cco_coll_shared_gpu_parts(-1, 2), 0);
}

TEST(signature) {
  ccoCollArgs a;
  memset(&a, 0, sizeof(a));
  a.count = 1000;
  a.dtype = ccoFloat32;
  uint64_t base = cco_coll_signature(CCO_COLL_ALLREDUCE, ccoAlgoOneShot, 16, &a, 4096, 8192);
  CHECK(base != 0 && base != CCO_COLL_SIGNATURE_REFUSED);
  CHECK_EQ(cco_coll_signature(CCO_COLL_ALLREDUCE, ccoAlgoOneShot, 16, &a, 4096, 8192), base);
  /* Everything the ranks must agree on changes it... */
  CHECK(cco_coll_signature(CCO_COLL_REDUCESCATTER, ccoAlgoOneShot, 16, &a, 4096, 8192) != base);
  CHECK(cco_coll_signature(CCO_COLL_ALLREDUCE, ccoAlgoLL, 16, &a, 4096, 8192) != base);
  CHECK(cco_coll_signature(CCO_COLL_ALLREDUCE, ccoAlgoOneShot, 8, &a, 4096, 8192) != base);
  CHECK(cco_coll_signature(CCO_COLL_ALLREDUCE, ccoAlgoOneShot, 16, &a, 4100, 8192) != base);
  CHECK(cco_coll_signature(CCO_COLL_ALLREDUCE, ccoAlgoOneShot, 16, &a, 4096, 8196) != base);
  ccoCollArgs b = a;
  b.count = 1001;
  CHECK(cco_coll_signature(CCO_COLL_ALLREDUCE, ccoAlgoOneShot, 16, &b, 4096, 8192) != base);
  b = a;
  b.dtype = ccoBfloat16;
  CHECK(cco_coll_signature(CCO_COLL_ALLREDUCE, ccoAlgoOneShot, 16, &b, 4096, 8192) != base);
  b = a;
  b.op = ccoMax;
  CHECK(cco_coll_signature(CCO_COLL_ALLREDUCE, ccoAlgoOneShot, 16, &b, 4096, 8192) != base);
  b = a;
  b.root = 1;
  CHECK(cco_coll_signature(CCO_COLL_ALLREDUCE, ccoAlgoOneShot, 16, &b, 4096, 8192) != base);
  /* ...but not what differs between ranks by design (window handles are
   * per-rank pointers; the slot offsets stand for them). */
  b = a;
  b.sendWin = (ccoWindow_t)(uintptr_t)0x1000;
  b.scratchOff = 64;
  CHECK_EQ(cco_coll_signature(CCO_COLL_ALLREDUCE, ccoAlgoOneShot, 16, &b, 4096, 8192), base);
}

int main(void) { return RUN_TESTS(); }
