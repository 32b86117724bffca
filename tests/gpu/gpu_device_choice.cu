// Which GPU a communicator takes. A thread that never chose one gets GPU
// CCO_LOCAL_RANK modulo the visible GPUs, and the CUDA runtime then works on
// that GPU too; a thread that chose one keeps it, also for a second
// communicator created on another thread of the same process. Nothing here
// touches CUDA before the first communicator exists: that is the case under
// test (every other GPU test picks its device first).
#define GPU_TEST_NAME "gpu_device_choice"
#include <pthread.h>
#include <string.h>

#include "gpu_check.cuh"

typedef struct {
  ccoUniqueId id;
  int nRanks, rank, device, chosen;
  ccoResult_t res;
  char error[256];
} second_comm;

// A thread that picks GPU `device` itself, then creates, checks and
// destroys a second communicator of the same ranks.
static void* second_comm_thread(void* arg) {
  second_comm* s = (second_comm*)arg;
  s->chosen = -2;
  if (cudaSetDevice(s->device) != cudaSuccess) return NULL;
  ccoComm* comm = NULL;
  s->res = ccoCommCreate(s->id, s->nRanks, s->rank, 0, &comm);
  if (s->res != ccoSuccess) {
    snprintf(s->error, sizeof(s->error), "%s", ccoGetLastError(NULL));
    return NULL;
  }
  ccoCommCudaDevice(comm, &s->chosen);
  // Memory of the second communicator lives on its GPU, and LSA peers on
  // other GPUs can still map it (a collective registration).
  ccoWindow_t win = NULL;
  void* local = NULL;
  s->res = ccoWindowRegisterAlloc(comm, 2u << 20, &win, &local);
  if (s->res == ccoSuccess) {
    cudaPointerAttributes attr;
    if (cudaPointerGetAttributes(&attr, local) != cudaSuccess || attr.device != s->device) s->chosen = -3;
    s->res = ccoWindowDeregister(comm, win);
  }
  if (s->res != ccoSuccess) snprintf(s->error, sizeof(s->error), "%s", ccoGetLastError(comm));
  ccoResult_t d = ccoCommDestroy(comm);
  if (s->res == ccoSuccess) s->res = d;
  return NULL;
}

int main(void) {
  setenv("CCO_PLATFORM", "cuda", 1);
  if (ccoCommCreateFromEnv(0, &g_comm) != ccoSuccess) {
    fprintf(stderr, "create: %s\n", ccoGetLastError(NULL));
    return 1;
  }
  int size = 0;
  ccoCommRank(g_comm, &g_rank);
  ccoCommSize(g_comm, &size);
  int count = 0, device = -9, runtimeDevice = -9;
  CUDA_OK(cudaGetDeviceCount(&count));
  const char* localEnv = getenv("CCO_LOCAL_RANK");
  int local = localEnv ? atoi(localEnv) : 0;
  int expected = count > 0 ? local % count : 0;
  OK(ccoCommCudaDevice(g_comm, &device));
  CHECK(device == expected, "no device chosen: the communicator took GPU %d (local rank %d, %d GPUs; expected %d)",
        device, local, count, expected);
  CUDA_OK(cudaGetDevice(&runtimeDevice));
  CHECK(runtimeDevice == device, "the runtime works on the communicator's GPU afterwards (%d, %d)", runtimeDevice,
        device);
  void* p = NULL;
  cudaPointerAttributes attr;
  memset(&attr, 0, sizeof(attr));
  CUDA_OK(cudaMalloc(&p, 1 << 20));
  CUDA_OK(cudaPointerGetAttributes(&attr, p));
  CHECK(attr.device == device, "cudaMalloc after create lands on GPU %d (%d)", device, attr.device);
  CUDA_OK(cudaFree(p));
  ccoWindow_t win = NULL;
  void* local0 = NULL;
  OK(ccoWindowRegisterAlloc(g_comm, 2u << 20, &win, &local0));
  memset(&attr, 0, sizeof(attr));
  CUDA_OK(cudaPointerGetAttributes(&attr, local0));
  CHECK(attr.device == device, "symmetric memory lives on GPU %d (%d)", device, attr.device);
  OK(ccoWindowDeregister(g_comm, win));
  int bad = -9;
  CHECK(ccoCommCudaDevice(g_comm, NULL) == ccoInvalidArgument, "NULL device: invalid argument");
  CHECK(ccoCommCudaDevice(NULL, &bad) == ccoInvalidArgument && bad == -9, "NULL communicator: invalid argument");

  // A second communicator from a thread that chose the next GPU itself.
  second_comm s;
  memset(&s, 0, sizeof(s));
  if (g_rank == 0) OK(ccoGetUniqueId(&s.id));
  ccoUniqueId* all = (ccoUniqueId*)calloc((size_t)size, sizeof(*all));
  CHECK(all != NULL, "room for %d ids", size);
  if (all) {
    OK(ccoBootstrapAllGather(g_comm, &s.id, all, sizeof(s.id)));
    s.id = all[0];
    s.nRanks = size;
    s.rank = g_rank;
    s.device = count > 0 ? (device + 1) % count : 0;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, second_comm_thread, &s) == 0, "second thread started");
    pthread_join(t, NULL);
    CHECK(s.res == ccoSuccess, "second communicator on a thread that chose GPU %d: %s (%s)", s.device,
          ccoGetErrorString(s.res), s.error);
    CHECK(s.chosen == s.device, "the second communicator kept the thread's GPU %d (%d)", s.device, s.chosen);
    free(all);
  }
  CUDA_OK(cudaGetDevice(&runtimeDevice));
  CHECK(runtimeDevice == device, "the main thread still works on GPU %d (%d)", device, runtimeDevice);
  OK(ccoBarrierAll(g_comm));
  OK(ccoCommDestroy(g_comm));
  return finish();
}
