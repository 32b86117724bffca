/* Device communicator: requirements validation, layout, several device
 * communicators, device copies, the abort word, and the device API run on
 * the host platform by one rank. */
#include <stdlib.h>
#include <string.h>

#include "cco/cco.h"
#include "cco/cco_device.h"
#include "cco/cco_gda.h"
#include "test.h"

static ccoComm* one_rank_comm(void) {
  ccoUniqueId id;
  ccoComm* comm = NULL;
  if (ccoGetUniqueId(&id) != ccoSuccess || ccoCommCreate(id, 1, 0, 0, &comm) != ccoSuccess) return NULL;
  return comm;
}

static ccoResult_t create_with(ccoComm* comm, ccoDevCommRequirements r, ccoDevComm* dc) {
  return ccoDevCommCreate(comm, &r, dc);
}

TEST(initializer_defaults) {
  ccoDevCommRequirements r = CCO_DEV_COMM_REQUIREMENTS_INITIALIZER;
  CHECK_EQ(r.size, sizeof(ccoDevCommRequirements));
  CHECK_EQ(r.magic, CCO_DEV_COMM_REQUIREMENTS_MAGIC);
  CHECK_EQ(r.version, CCO_DEV_COMM_REQUIREMENTS_VERSION);
  CHECK_EQ(r.gdaConnectionType, ccoGdaConnectionCrossNode);
  CHECK_EQ(r.gdaContextCount, 1);
  CHECK_EQ(r.gdaSignalCount, 64);
  CHECK_EQ(r.gdaCounterCount, 64);
  CHECK_EQ(r.gdaQueueDepth, 1024);
  CHECK_EQ(r.lsaBarrierCount, 1);
  CHECK_EQ(r.sdmaQueueCount, 0);
  CHECK_EQ(sizeof(ccoDevComm), 256);
}

TEST(validation_refuses_bad_requirements) {
  ccoComm* comm = one_rank_comm();
  CHECK(comm != NULL);
  if (!comm) return;
  ccoDevComm dc;
  const ccoDevCommRequirements good = CCO_DEV_COMM_REQUIREMENTS_INITIALIZER;
  struct {
    const char* field;
    size_t offset;
    uint32_t value;
    const char* words;
  } bad[] = {
      {"magic", offsetof(ccoDevCommRequirements, magic), 7, "magic"},
      {"size", offsetof(ccoDevCommRequirements, size), 60, "size"},
      {"version", offsetof(ccoDevCommRequirements, version), 2, "version"},
      {"gdaConnectionType", offsetof(ccoDevCommRequirements, gdaConnectionType), 4, "gdaConnectionType"},
      {"gdaContextCount", offsetof(ccoDevCommRequirements, gdaContextCount), 0, "gdaContextCount"},
      {"gdaContextCount", offsetof(ccoDevCommRequirements, gdaContextCount), 65, "gdaContextCount"},
      {"gdaSignalCount", offsetof(ccoDevCommRequirements, gdaSignalCount), (1u << 20) + 1, "gdaSignalCount"},
      {"gdaCounterCount", offsetof(ccoDevCommRequirements, gdaCounterCount), (1u << 20) + 1, "gdaCounterCount"},
      {"gdaQueueDepth", offsetof(ccoDevCommRequirements, gdaQueueDepth), 1000, "gdaQueueDepth"},
      {"gdaQueueDepth", offsetof(ccoDevCommRequirements, gdaQueueDepth), 8, "gdaQueueDepth"},
      {"gdaTrafficClass", offsetof(ccoDevCommRequirements, gdaTrafficClass), 256, "gdaTrafficClass"},
      {"lsaBarrierCount", offsetof(ccoDevCommRequirements, lsaBarrierCount), 5000, "barrier counts"},
      {"railGdaBarrierCount", offsetof(ccoDevCommRequirements, railGdaBarrierCount), 5000, "barrier counts"},
      {"barrierCount", offsetof(ccoDevCommRequirements, barrierCount), 5000, "barrier counts"},
      {"sdmaQueueCount", offsetof(ccoDevCommRequirements, sdmaQueueCount), 9, "sdmaQueueCount"},
      {"reserved", offsetof(ccoDevCommRequirements, reserved), 1, "reserved"},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    ccoDevCommRequirements r = good;
    memcpy((char*)&r + bad[i].offset, &bad[i].value, sizeof(uint32_t));
    memset(&dc, 0x5a, sizeof(dc));
    ccoResult_t res = create_with(comm, r, &dc);
    CHECK_EQ(res, ccoInvalidArgument);
    if (!strstr(ccoGetLastError(comm), bad[i].words)) {
      fprintf(stderr, "  %s: message '%s' does not name it\n", bad[i].field, ccoGetLastError(comm));
      CHECK(0);
    }
    CHECK_EQ(((unsigned char*)&dc)[0], 0x5a); /* output untouched */
  }
  CHECK_EQ(ccoDevCommCreate(comm, NULL, &dc), ccoInvalidArgument);
  CHECK_EQ(ccoDevCommCreate(comm, &good, NULL), ccoInvalidArgument);
  /* The communicator is still usable after refused requirements. */
  CHECK_EQ(create_with(comm, good, &dc), ccoSuccess);
  CHECK_EQ(ccoDevCommDestroy(comm, &dc), ccoSuccess);
  CHECK_EQ(ccoCommDestroy(comm), ccoSuccess);
}

TEST(fields_and_several_devcomms) {
  ccoComm* comm = one_rank_comm();
  CHECK(comm != NULL);
  if (!comm) return;
  ccoDevCommRequirements r = CCO_DEV_COMM_REQUIREMENTS_INITIALIZER;
  r.lsaBarrierCount = 8;
  r.barrierCount = 2;
  r.gdaConnectionType = ccoGdaConnectionNone;
  ccoDevComm a, b;
  CHECK_EQ(ccoDevCommCreate(comm, &r, &a), ccoSuccess);
  r.lsaBarrierCount = 1;
  CHECK_EQ(ccoDevCommCreate(comm, &r, &b), ccoSuccess);
  CHECK_EQ(a.magic, CCO_DEV_COMM_MAGIC);
  CHECK_EQ(a.worldSize, 1);
  CHECK_EQ(a.lsaSize, 1);
  CHECK_EQ(a.lsaBarrierCount, 10);
  CHECK_EQ(a.barrierCount, 2);
  CHECK_EQ(a.sdmaQueueCount, 2); /* 0 means 2 */
  CHECK_EQ(a.gdaConnectionType, ccoGdaConnectionNone);
  CHECK(a.handle != b.handle);
  CHECK(a.resourceWindow != b.resourceWindow);
  void* base;
  size_t slot;
  CHECK_EQ(ccoCommFlatVa(comm, &base, &slot), ccoSuccess);
  int device = 7;
  CHECK_EQ(ccoCommCudaDevice(comm, &device), ccoSuccess);
  CHECK_EQ(device, -1); /* host platform: no CUDA device */
  CHECK_EQ(ccoCommCudaDevice(comm, NULL), ccoInvalidArgument);
  CHECK_EQ(ccoCommCudaDevice(NULL, &device), ccoInvalidArgument);
  CHECK_EQ(a.flatBase, (uint64_t)(uintptr_t)base);
  CHECK_EQ(a.slotSize, slot);
  CHECK_EQ(ccoDevTeam(&a, ccoTeamWorld).nRanks, 1);
  CHECK_EQ(ccoDevTeamRankToWorld(&a, ccoTeamLsa, 0), 0);
  CHECK_EQ(ccoDevTeamRankToWorld(&a, ccoTeamLsa, 1), -1);
  CHECK_EQ(ccoDevTeamRankFromWorld(&a, ccoTeamRail, 0), 0);
  /* Device copies (host memory on the host platform) hold the same bytes. */
  ccoDevComm* copy = NULL;
  CHECK_EQ(ccoDevCommCopyToDevice(comm, &a, &copy), ccoSuccess);
  CHECK(copy && memcmp(copy, &a, sizeof(a)) == 0);
  CHECK_EQ(ccoDevCommDestroy(comm, &a), ccoSuccess);
  CHECK_EQ(ccoDevCommDestroy(comm, &a), ccoInvalidArgument); /* twice */
  CHECK_EQ(ccoDevCommCopyToDevice(comm, &a, &copy), ccoInvalidArgument);
  /* b stays; destroy releases it. */
  CHECK_EQ(ccoCommDestroy(comm), ccoSuccess);
}

TEST(barrier_sessions_and_abort_word) {
  ccoComm* comm = one_rank_comm();
  CHECK(comm != NULL);
  if (!comm) return;
  ccoDevCommRequirements r = CCO_DEV_COMM_REQUIREMENTS_INITIALIZER;
  r.lsaBarrierCount = 3;
  ccoDevComm dc;
  CHECK_EQ(ccoDevCommCreate(comm, &r, &dc), ccoSuccess);
  /* Epochs persist across sessions: 1000 sessions on each barrier. */
  int bad = 0;
  for (int i = 0; i < 3000; i++) {
    ccoLsaBarrierSession s = ccoLsaBarrierSessionInit(&dc, (uint32_t)(i % 3), ccoCoopThread);
    bad += ccoLsaBarrierSync(&s) != ccoDevSuccess;
    ccoLsaBarrierSessionEnd(&s);
  }
  CHECK_EQ(bad, 0);
  /* An index past lsaBarrierCount touches nothing and says so. */
  ccoLsaBarrierSession out = ccoLsaBarrierSessionInit(&dc, dc.lsaBarrierCount, ccoCoopThread);
  CHECK_EQ(ccoLsaBarrierSync(&out), ccoDevInvalid);
  CHECK_EQ(ccoLsaBarrierSyncTimeout(&out, 1000), ccoDevInvalid);
  ccoLsaBarrierSessionEnd(&out);
  ccoLsaBarrierSession s = ccoLsaBarrierSessionInit(&dc, 0, ccoCoopBlock);
  CHECK_EQ(s.epoch, 1000);
  /* Waiting for an epoch nobody reached times out, then the abort word
   * makes waits return at once. */
  s.epoch += 5;
  CHECK_EQ(ccoLsaBarrierWaitTimeout(&s, 2000000), ccoDevTimeout);
  CHECK_EQ(ccoDevCommAborted(&dc), 0);
  CHECK_EQ(ccoCommAbort(comm), ccoSuccess);
  CHECK_EQ(ccoDevCommAborted(&dc), 1);
  CHECK_EQ(ccoLsaBarrierWait(&s), ccoDevAborted);
  uint64_t sig = 0;
  CHECK_EQ(ccoSignalWaitUntil(&dc, &sig, 1, 0), ccoDevAborted);
  CHECK_EQ(ccoCommDestroy(comm), ccoSuccess);
}

TEST(world_barrier_on_one_host) {
  ccoComm* comm = one_rank_comm();
  CHECK(comm != NULL);
  if (!comm) return;
  ccoDevCommRequirements r = CCO_DEV_COMM_REQUIREMENTS_INITIALIZER;
  r.gdaConnectionType = ccoGdaConnectionNone;
  r.lsaBarrierCount = 1;
  r.barrierCount = 2;
  ccoDevComm dc;
  CHECK_EQ(ccoDevCommCreate(comm, &r, &dc), ccoSuccess);
  CHECK_EQ(dc.lsaBarrierCount, 3); /* the users' one, then the world barriers' */
  CHECK_EQ(dc.barrierCount, 2);
  int bad = 0;
  for (int i = 0; i < 10; i++) {
    /* One host: step 1 alone, and no GDA handle is needed. */
    ccoBarrierSession b = ccoBarrierSessionInit(&dc, NULL, (uint32_t)(i % 2), ccoCoopThread);
    bad += ccoBarrierSync(&b) != ccoDevSuccess;
    ccoBarrierSessionEnd(&b);
  }
  CHECK_EQ(bad, 0);
  /* World barrier 1 is LSA barrier 2; the users' LSA barrier 0 is untouched. */
  CHECK_EQ(ccoLsaBarrierSessionInit(&dc, 2, ccoCoopThread).epoch, 5);
  CHECK_EQ(ccoLsaBarrierSessionInit(&dc, 1, ccoCoopThread).epoch, 5);
  CHECK_EQ(ccoLsaBarrierSessionInit(&dc, 0, ccoCoopThread).epoch, 0);
  ccoBarrierSession out = ccoBarrierSessionInit(&dc, NULL, 2, ccoCoopThread);
  CHECK_EQ(ccoBarrierSyncTimeout(&out, 1000), ccoDevInvalid);
  ccoBarrierSessionEnd(&out);
  CHECK_EQ(ccoCommDestroy(comm), ccoSuccess);
}

TEST(signal_helpers) {
  uint64_t sig = 0;
  ccoSignalStore(&sig, 5);
  CHECK_EQ(ccoSignalLoad(&sig), 5);
  CHECK_EQ(ccoSignalAdd(&sig, 3), 5);
  CHECK_EQ(ccoSignalLoad(&sig), 8);
  ccoDevComm none;
  memset(&none, 0, sizeof(none));
  CHECK_EQ(ccoSignalWaitUntil(&none, &sig, 8, 0), ccoDevSuccess);
  CHECK_EQ(ccoSignalWaitUntil(&none, &sig, 9, 1000000), ccoDevTimeout);
  CHECK_EQ(ccoCoopSize(ccoCoopThread), 1);
  CHECK_EQ(ccoCoopSize(ccoCoopBlock), 1); /* a CPU thread is a block of one */
  CHECK_EQ(ccoCoopRank(ccoCoopWarp), 0);
}

int main(void) {
  setenv("CCO_PLATFORM", "host", 1);
  setenv("CCO_DEBUG", "NONE", 0);
  return RUN_TESTS();
}
