/*
 * Communicator handles: where ccoComm objects live, and which are alive.
 *
 * A handle is the object's address, so a destroyed handle must never
 * become valid again. With malloc it did: the next ccoCommCreate often got
 * the same address back, and a stale pointer then passed the live-table
 * check and reached the new communicator (a second ccoCommDestroy through
 * it destroyed the new one). So objects come from an address range of
 * their own that is never handed out twice: a large reservation with no
 * memory behind it, carved in whole pages from the front. A destroyed
 * object's pages go back to the system and stay inaccessible (PROT_NONE),
 * still reserved, so their addresses are never reused. The range holds
 * about a million communicators (ccoComm is a few KiB); past that, objects
 * come from calloc and the guarantee is only the live table's.
 *
 * The live table is what every public function checks before it touches a
 * handle (CCO_VALIDATE_COMM), so a foreign or destroyed handle is refused
 * instead of dereferenced.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "comm/comm.h"

#define ARENA_BYTES (8ull << 30) /* address space only; pages come and go */

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static char* g_arena;       /* NULL until the first communicator; MAP_FAILED: none */
static size_t g_arenaUsed;  /* bytes handed out, never handed out again */
static const ccoComm** g_live;
static size_t g_nlive, g_caplive;

static size_t object_bytes(void) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  return (sizeof(ccoComm) + page - 1) / page * page;
}

static bool in_arena(const void* p) {
  return g_arena && g_arena != MAP_FAILED && (const char*)p >= g_arena &&
         (const char*)p < g_arena + ARENA_BYTES;
}

void cco_comm_handle_arena(const void** base, size_t* bytes) {
  pthread_mutex_lock(&g_lock);
  bool mapped = g_arena && g_arena != MAP_FAILED;
  *base = mapped ? g_arena : NULL;
  *bytes = mapped ? ARENA_BYTES : 0;
  pthread_mutex_unlock(&g_lock);
}

ccoComm* cco_comm_handle_new(void) {
  size_t bytes = object_bytes();
  ccoComm* comm = NULL;
  pthread_mutex_lock(&g_lock);
  if (!g_arena) {
    g_arena = mmap(NULL, ARENA_BYTES, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  }
  if (g_arena != MAP_FAILED && g_arenaUsed + bytes <= ARENA_BYTES) {
    char* p = g_arena + g_arenaUsed;
    if (mprotect(p, bytes, PROT_READ | PROT_WRITE) == 0) { /* fresh pages read as zero */
      g_arenaUsed += bytes;
      comm = (ccoComm*)p;
    }
  }
  pthread_mutex_unlock(&g_lock);
  return comm ? comm : calloc(1, sizeof(ccoComm));
}

void cco_comm_handle_release(ccoComm* comm) {
  if (!comm) return;
  pthread_mutex_lock(&g_lock);
  bool mine = in_arena(comm);
  pthread_mutex_unlock(&g_lock);
  if (!mine) {
    free(comm);
    return;
  }
  /* The memory goes back; the addresses stay reserved and inaccessible. */
  size_t bytes = object_bytes();
  madvise(comm, bytes, MADV_DONTNEED);
  mprotect(comm, bytes, PROT_NONE);
}

bool cco_comm_handle_publish(const ccoComm* comm) {
  pthread_mutex_lock(&g_lock);
  bool ok = true;
  if (g_nlive == g_caplive) {
    size_t cap = g_caplive ? 2 * g_caplive : 16;
    const ccoComm** grown = realloc(g_live, cap * sizeof(*grown));
    if (grown) g_live = grown, g_caplive = cap;
    else ok = false;
  }
  if (ok) g_live[g_nlive++] = comm;
  pthread_mutex_unlock(&g_lock);
  return ok;
}

void cco_comm_handle_retire(const ccoComm* comm) {
  pthread_mutex_lock(&g_lock);
  for (size_t i = 0; i < g_nlive; i++)
    if (g_live[i] == comm) {
      g_live[i] = g_live[--g_nlive];
      break;
    }
  pthread_mutex_unlock(&g_lock);
}

bool cco_comm_is_valid(const ccoComm* comm) {
  if (!comm) return false;
  bool live = false;
  pthread_mutex_lock(&g_lock);
  for (size_t i = 0; i < g_nlive && !live; i++) live = g_live[i] == comm;
  pthread_mutex_unlock(&g_lock);
  return live && comm->magic == CCO_COMM_MAGIC;
}
