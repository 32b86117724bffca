/* Unit tests for src/boot/affinity.c against fake sysfs trees. */
#include "boot/affinity.h"

#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"

/* ------------------------------------------------------------------------ */
/* Fake sysfs helpers                                                       */
/* ------------------------------------------------------------------------ */

typedef struct {
  char root[256];
} fake_tree;

static void tree_init(fake_tree* t) {
  snprintf(t->root, sizeof(t->root), "/tmp/cco_affinity_XXXXXX");
  if (!mkdtemp(t->root)) {
    perror("mkdtemp");
    abort();
  }
}

static int remove_entry(const char* path, const struct stat* st, int flag, struct FTW* ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path);
}

static void tree_free(fake_tree* t) {
  CHECK_EQ(nftw(t->root, remove_entry, 16, FTW_DEPTH | FTW_PHYS), 0);
}

/* mkdir -p of every parent of `path`. */
static void make_parents(char* path) {
  for (char* p = path + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(path, 0755) != 0 && errno != EEXIST) {
      perror(path);
      abort();
    }
    *p = '/';
  }
}

static void tree_write(fake_tree* t, const char* content, const char* relFmt, ...)
    __attribute__((format(printf, 3, 4)));
static void tree_write(fake_tree* t, const char* content, const char* relFmt, ...) {
  char rel[512], path[1024];
  va_list ap;
  va_start(ap, relFmt);
  vsnprintf(rel, sizeof(rel), relFmt, ap);
  va_end(ap);
  snprintf(path, sizeof(path), "%s/%s", t->root, rel);
  make_parents(path);
  FILE* f = fopen(path, "w");
  if (!f || fputs(content, f) < 0 || fclose(f) != 0) {
    perror(path);
    abort();
  }
}

static void add_gpu(fake_tree* t, const char* busId, const char* cpulist, const char* numa) {
  char text[4200];
  if (cpulist) {
    snprintf(text, sizeof(text), "%s\n", cpulist);
    tree_write(t, text, "sys/bus/pci/devices/%s/local_cpulist", busId);
  }
  if (numa) {
    snprintf(text, sizeof(text), "%s\n", numa);
    tree_write(t, text, "sys/bus/pci/devices/%s/numa_node", busId);
  }
}

/* cpu k and k + nCores are SMT siblings. */
static void add_smt2_topology(fake_tree* t, int nCores) {
  for (int k = 0; k < nCores; k++) {
    char text[64];
    snprintf(text, sizeof(text), "%d,%d\n", k, k + nCores);
    tree_write(t, text, "sys/devices/system/cpu/cpu%d/topology/thread_siblings_list", k);
    tree_write(t, text, "sys/devices/system/cpu/cpu%d/topology/thread_siblings_list", k + nCores);
  }
}

static cpu_set_t cpus(const char* list) {
  cpu_set_t s;
  CPU_ZERO(&s);
  if (cco_cpulist_parse(list, &s) != 0) {
    fprintf(stderr, "bad test cpulist '%s'\n", list);
    abort();
  }
  return s;
}

static const char* fmt(const cpu_set_t* s) {
  static char buf[8][4096]; /* a few calls per CHECK */
  static int next;
  char* b = buf[next++ % 8];
  if (cco_cpulist_format(s, b, 4096) != 0) snprintf(b, 4096, "<format failed>");
  return b;
}

/* ------------------------------------------------------------------------ */
/* The 2-socket machine: 32 cores per socket, SMT2, 4 GPUs per NUMA node    */
/* ------------------------------------------------------------------------ */

#define NODE0 "0-31,64-95"
#define NODE1 "32-63,96-127"

/* Listed out of bus-id order, so the test also covers the sorting. */
static const char* const g_gpus[8] = {"0000:5d:00.0", "0000:1a:00.0", "0000:4c:00.0",
                                      "0000:3b:00.0", "0000:db:00.0", "0000:9a:00.0",
                                      "0000:cc:00.0", "0000:ab:00.0"};
/* Node 0 GPUs in bus-id order: their slice index. */
static const char* const g_node0_sorted[4] = {"0000:1a:00.0", "0000:3b:00.0", "0000:4c:00.0",
                                              "0000:5d:00.0"};

static void make_two_socket(fake_tree* t) {
  tree_init(t);
  add_smt2_topology(t, 64);
  for (int i = 0; i < 8; i++)
    add_gpu(t, g_gpus[i], i < 4 ? NODE0 : NODE1, i < 4 ? "0" : "1");
}

static cco_affinity_query query(const fake_tree* t, const char* gpu, const char* const* visible,
                                int n) {
  return (cco_affinity_query){t->root, gpu, visible, n, false};
}

static cco_affinity_kind compute(const cco_affinity_query* q, const char* current,
                                 cpu_set_t* result, char* why, size_t whySize) {
  cpu_set_t cur = cpus(current);
  cco_affinity_kind kind = (cco_affinity_kind)-1;
  CHECK_EQ(cco_affinity_compute(q, &cur, result, &kind, why, whySize), ccoSuccess);
  return kind;
}

/* ------------------------------------------------------------------------ */
/* cpulist                                                                  */
/* ------------------------------------------------------------------------ */

TEST(cpulist_parse_format_basic) {
  cpu_set_t s;
  char buf[64];
  CHECK_EQ(cco_cpulist_parse("0-3,8,10-11\n", &s), 0);
  CHECK_EQ(CPU_COUNT(&s), 7);
  CHECK(CPU_ISSET(8, &s) && CPU_ISSET(11, &s) && !CPU_ISSET(9, &s));
  CHECK_EQ(cco_cpulist_format(&s, buf, sizeof(buf)), 0);
  CHECK_STR(buf, "0-3,8,10-11");
  CHECK_EQ(cco_cpulist_parse("5", &s), 0);
  CHECK_STR(fmt(&s), "5");
  CHECK_EQ(cco_cpulist_parse("1023", &s), 0);
  CHECK_STR(fmt(&s), "1023");
  CHECK_EQ(cco_cpulist_parse("0-1023", &s), 0);
  CHECK_EQ(CPU_COUNT(&s), CPU_SETSIZE);
  CHECK_STR(fmt(&s), "0-1023");
  /* Unsorted and overlapping items are valid; format normalizes them. */
  CHECK_EQ(cco_cpulist_parse("8,0-3,2-5,7", &s), 0);
  CHECK_STR(fmt(&s), "0-5,7-8");
}

TEST(cpulist_empty) {
  cpu_set_t s = cpus("1");
  char buf[4] = "xyz";
  CHECK_EQ(cco_cpulist_parse("", &s), 0);
  CHECK_EQ(CPU_COUNT(&s), 0);
  s = cpus("1");
  CHECK_EQ(cco_cpulist_parse("\n", &s), 0);
  CHECK_EQ(CPU_COUNT(&s), 0);
  CHECK_EQ(cco_cpulist_format(&s, buf, sizeof(buf)), 0);
  CHECK_STR(buf, "");
  CHECK_EQ(cco_cpulist_format(&s, buf, 1), 0);
}

TEST(cpulist_strides) {
  cpu_set_t s;
  CHECK_EQ(cco_cpulist_parse("0-10:2", &s), 0);
  CHECK_STR(fmt(&s), "0,2,4,6,8,10");
  CHECK_EQ(cco_cpulist_parse("1-10:3,20", &s), 0);
  CHECK_STR(fmt(&s), "1,4,7,10,20");
  /* Kernel group syntax: the first 2 cpus of every group of 256. */
  CHECK_EQ(cco_cpulist_parse("0-1023:2/256", &s), 0);
  CHECK_STR(fmt(&s), "0-1,256-257,512-513,768-769");
  CHECK_EQ(cco_cpulist_parse("0-9:3/4\n", &s), 0);
  CHECK_STR(fmt(&s), "0-2,4-6,8-9");
  CHECK_EQ(cco_cpulist_parse("0-7:4/4", &s), 0);
  CHECK_STR(fmt(&s), "0-7");
  CHECK_EQ(cco_cpulist_parse("3-5:100", &s), 0);
  CHECK_STR(fmt(&s), "3");
}

TEST(cpulist_malformed) {
  static const char* const bad[] = {
      "abc", "1-",     "-1",     "3-1",      "1,,2",   "1,",     ",1",      "1 2",
      " 1",  "1-3x",   "0x1",    "+1",       "1024",   "0-1024", "99999999999999999999",
      "0-3:", "0-3:0", "0-3:2/", "0-3:3/2",  "0-3:0/2", "0-3:2/0", "1:2",    "1-2-3",
      "1;2", "1-3:2:2", "1/2",
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    cpu_set_t s = cpus("7");
    if (cco_cpulist_parse(bad[i], &s) != -1) {
      fprintf(stderr, "  accepted '%s'\n", bad[i]);
      CHECK(0);
    }
    CHECK(CPU_ISSET(7, &s) && CPU_COUNT(&s) == 1); /* untouched on failure */
  }
  cpu_set_t s;
  CHECK_EQ(cco_cpulist_parse(NULL, &s), -1);
  CHECK_EQ(cco_cpulist_parse("1", NULL), -1);
}

TEST(cpulist_format_buffer_limits) {
  cpu_set_t s = cpus("0-3,8");
  char buf[16];
  CHECK_EQ(cco_cpulist_format(&s, buf, 6), 0); /* "0-3,8" + NUL */
  CHECK_STR(buf, "0-3,8");
  CHECK_EQ(cco_cpulist_format(&s, buf, 5), -1);
  CHECK_STR(buf, "");
  CHECK_EQ(cco_cpulist_format(&s, buf, 0), -1);
  CHECK_EQ(cco_cpulist_format(&s, NULL, 16), -1);
  CHECK_EQ(cco_cpulist_format(NULL, buf, 16), -1);
  /* Every other cpu: the longest list, must fit the documented sizes. */
  cpu_set_t every;
  CHECK_EQ(cco_cpulist_parse("0-1023:2", &every), 0);
  char big[4096];
  CHECK_EQ(cco_cpulist_format(&every, big, sizeof(big)), 0);
  cpu_set_t back;
  CHECK_EQ(cco_cpulist_parse(big, &back), 0);
  CHECK(CPU_EQUAL(&back, &every));
}

TEST(cpulist_round_trip_random) {
  unsigned x = 12345;
  for (int iter = 0; iter < 200; iter++) {
    cpu_set_t s;
    CPU_ZERO(&s);
    int density = 1 + iter % 7;
    for (int c = 0; c < CPU_SETSIZE; c++) {
      x = x * 1103515245u + 12345u;
      if ((x >> 16) % 8 < (unsigned)density) CPU_SET(c, &s);
    }
    char buf[4096];
    cpu_set_t back;
    CHECK_EQ(cco_cpulist_format(&s, buf, sizeof(buf)), 0);
    CHECK_EQ(cco_cpulist_parse(buf, &back), 0);
    CHECK(CPU_EQUAL(&s, &back));
  }
}

/* ------------------------------------------------------------------------ */
/* compute                                                                  */
/* ------------------------------------------------------------------------ */

/* Both SMT siblings of every core are on the same side of `s`. */
static bool whole_cores(const cpu_set_t* s, int nCores) {
  for (int k = 0; k < nCores; k++)
    if (CPU_ISSET(k, s) != CPU_ISSET(k + nCores, s)) return false;
  return true;
}

TEST(two_sockets_eight_gpus_slices) {
  fake_tree t;
  make_two_socket(&t);
  cpu_set_t slice[4], all;
  CPU_ZERO(&all);
  static const char* const expect[4] = {"0-7,64-71", "8-15,72-79", "16-23,80-87", "24-31,88-95"};
  for (int i = 0; i < 4; i++) {
    cco_affinity_query q = query(&t, g_node0_sorted[i], g_gpus, 8);
    char why[256];
    CHECK_EQ(compute(&q, "0-127", &slice[i], why, sizeof(why)), CCO_AFFINITY_SLICE);
    CHECK_STR(fmt(&slice[i]), expect[i]);
    CHECK(whole_cores(&slice[i], 64));
    CHECK_EQ(CPU_COUNT(&slice[i]), 16);
    CHECK(strstr(why, g_node0_sorted[i]) != NULL);
    CPU_OR(&all, &all, &slice[i]);
  }
  char why[256];
  cco_affinity_query q = query(&t, "0000:3b:00.0", g_gpus, 8);
  compute(&q, "0-127", &slice[1], why, sizeof(why));
  CHECK_STR(why, "gpu 0000:3b:00.0: slice 1 of 4 on numa node 0: cpus 8-15,72-79");
  for (int i = 0; i < 4; i++)
    for (int j = i + 1; j < 4; j++) {
      cpu_set_t both;
      CPU_AND(&both, &slice[i], &slice[j]);
      CHECK_EQ(CPU_COUNT(&both), 0);
    }
  cpu_set_t node0 = cpus(NODE0);
  CHECK(CPU_EQUAL(&all, &node0));

  /* Node 1: GPUs 9a, ab, cc, db in bus-id order. */
  cpu_set_t r;
  q = query(&t, "0000:cc:00.0", g_gpus, 8);
  CHECK_EQ(compute(&q, "0-127", &r, NULL, 0), CCO_AFFINITY_SLICE);
  CHECK_STR(fmt(&r), "48-55,112-119");
  tree_free(&t);
}

TEST(uneven_slices_cover_node) {
  fake_tree t;
  make_two_socket(&t);
  /* 3 GPUs on node 0, 32 cores: 10, 11 and 11 cores. */
  const char* const visible[3] = {"0000:1a:00.0", "0000:3b:00.0", "0000:4c:00.0"};
  static const char* const expect[3] = {"0-9,64-73", "10-20,74-84", "21-31,85-95"};
  for (int i = 0; i < 3; i++) {
    cco_affinity_query q = query(&t, visible[i], visible, 3);
    cpu_set_t r;
    CHECK_EQ(compute(&q, "0-127", &r, NULL, 0), CCO_AFFINITY_SLICE);
    CHECK_STR(fmt(&r), expect[i]);
  }
  tree_free(&t);
}

TEST(no_split_binds_whole_node) {
  fake_tree t;
  make_two_socket(&t);
  cco_affinity_query q = query(&t, "0000:4c:00.0", g_gpus, 8);
  q.noSplit = true;
  cpu_set_t r;
  CHECK_EQ(compute(&q, "0-127", &r, NULL, 0), CCO_AFFINITY_NODE);
  CHECK_STR(fmt(&r), NODE0);
  tree_free(&t);
}

TEST(cgroup_restricted_current) {
  fake_tree t;
  make_two_socket(&t);
  /* 16 cores of node 0 (plus some of node 1) allowed: 4 cores per GPU. */
  static const char* const expect[4] = {"0-3,64-67", "4-7,68-71", "8-11,72-75", "12-15,76-79"};
  for (int i = 0; i < 4; i++) {
    cco_affinity_query q = query(&t, g_node0_sorted[i], g_gpus, 8);
    cpu_set_t r;
    CHECK_EQ(compute(&q, "0-15,40-47,64-79", &r, NULL, 0), CCO_AFFINITY_SLICE);
    CHECK_STR(fmt(&r), expect[i]);
  }
  /* An outer binding to one hyperthread per core: each cpu is its own core. */
  cco_affinity_query q = query(&t, "0000:3b:00.0", g_gpus, 8);
  cpu_set_t r;
  CHECK_EQ(compute(&q, "0-31", &r, NULL, 0), CCO_AFFINITY_SLICE);
  CHECK_STR(fmt(&r), "8-15");
  tree_free(&t);
}

TEST(empty_intersection_unchanged) {
  fake_tree t;
  make_two_socket(&t);
  cco_affinity_query q = query(&t, "0000:1a:00.0", g_gpus, 8);
  cpu_set_t r;
  char why[256];
  CHECK_EQ(compute(&q, NODE1, &r, why, sizeof(why)), CCO_AFFINITY_UNCHANGED);
  CHECK_STR(fmt(&r), NODE1);
  CHECK(strstr(why, "unchanged") != NULL);
  tree_free(&t);
}

TEST(fewer_cores_than_gpus_node) {
  fake_tree t;
  make_two_socket(&t);
  cco_affinity_query q = query(&t, "0000:3b:00.0", g_gpus, 8);
  cpu_set_t r;
  /* Three cores ({0,64}, {1,65}, {2}) for four GPUs. */
  CHECK_EQ(compute(&q, "0-2,64-65,100", &r, NULL, 0), CCO_AFFINITY_NODE);
  CHECK_STR(fmt(&r), "0-2,64-65");
  /* Exactly one core per GPU still splits. */
  CHECK_EQ(compute(&q, "0-3,64-67", &r, NULL, 0), CCO_AFFINITY_SLICE);
  CHECK_STR(fmt(&r), "1,65");
  tree_free(&t);
}

TEST(single_gpu_on_node_binds_node) {
  fake_tree t;
  make_two_socket(&t);
  const char* const visible[5] = {"0000:1a:00.0", "0000:9a:00.0", "0000:ab:00.0", "0000:cc:00.0",
                                  "0000:db:00.0"};
  cco_affinity_query q = query(&t, "0000:1a:00.0", visible, 5);
  cpu_set_t r;
  CHECK_EQ(compute(&q, "0-127", &r, NULL, 0), CCO_AFFINITY_NODE);
  CHECK_STR(fmt(&r), NODE0);
  q = query(&t, "0000:1a:00.0", visible, 1);
  CHECK_EQ(compute(&q, "0-127", &r, NULL, 0), CCO_AFFINITY_NODE);
  /* The caller's own GPU missing from the visible list still counts once. */
  q = query(&t, "0000:1a:00.0", g_gpus + 1, 1);
  CHECK_EQ(compute(&q, "0-127", &r, NULL, 0), CCO_AFFINITY_NODE);
  q = query(&t, "0000:1a:00.0", g_gpus, 1); /* only 5d visible */
  CHECK_EQ(compute(&q, "0-127", &r, NULL, 0), CCO_AFFINITY_SLICE);
  CHECK_STR(fmt(&r), "0-15,64-79");
  tree_free(&t);
}

TEST(missing_or_bad_local_cpulist_unchanged) {
  fake_tree t;
  make_two_socket(&t);
  cco_affinity_query q = query(&t, "0000:ee:00.0", g_gpus, 8); /* no such device */
  cpu_set_t r;
  char why[256];
  CHECK_EQ(compute(&q, "0-127", &r, why, sizeof(why)), CCO_AFFINITY_UNCHANGED);
  CHECK_STR(fmt(&r), "0-127");
  CHECK(strstr(why, "local_cpulist") != NULL);
  tree_write(&t, "garbage\n", "sys/bus/pci/devices/0000:1a:00.0/local_cpulist");
  q = query(&t, "0000:1a:00.0", g_gpus, 8);
  CHECK_EQ(compute(&q, "3-5", &r, NULL, 0), CCO_AFFINITY_UNCHANGED);
  CHECK_STR(fmt(&r), "3-5");
  tree_free(&t);
}

TEST(missing_siblings_each_cpu_own_core) {
  fake_tree t;
  tree_init(&t);
  const char* const visible[2] = {"0000:02:00.0", "0000:01:00.0"};
  add_gpu(&t, visible[0], "0-7", "0");
  add_gpu(&t, visible[1], "0-7", "0");
  /* Only cpu 0 has a siblings file; it names cpu 4. */
  tree_write(&t, "0,4\n", "sys/devices/system/cpu/cpu0/topology/thread_siblings_list");
  tree_write(&t, "0,4\n", "sys/devices/system/cpu/cpu4/topology/thread_siblings_list");
  cpu_set_t r;
  cco_affinity_query q = query(&t, "0000:01:00.0", visible, 2);
  /* Cores {0,4},{1},{2},{3},{5},{6},{7}: 7 cores, 3 and 4. */
  CHECK_EQ(compute(&q, "0-7", &r, NULL, 0), CCO_AFFINITY_SLICE);
  CHECK_STR(fmt(&r), "0-2,4");
  q = query(&t, "0000:02:00.0", visible, 2);
  CHECK_EQ(compute(&q, "0-7", &r, NULL, 0), CCO_AFFINITY_SLICE);
  CHECK_STR(fmt(&r), "3,5-7");
  tree_free(&t);
}

TEST(numa_unknown_groups_by_cpulist) {
  fake_tree t;
  tree_init(&t);
  const char* const visible[4] = {"0000:03:00.0", "0000:01:00.0", "0000:02:00.0",
                                  "0000:04:00.0"};
  add_gpu(&t, visible[0], "0-7", "-1");
  add_gpu(&t, visible[1], "0-7", NULL); /* no numa_node file at all */
  add_gpu(&t, visible[2], "8-15", "-1");
  add_gpu(&t, visible[3], "0-3,4-7", "-1"); /* same set, other spelling */
  cpu_set_t r;
  char why[256];
  cco_affinity_query q = query(&t, "0000:01:00.0", visible, 4);
  CHECK_EQ(compute(&q, "0-15", &r, why, sizeof(why)), CCO_AFFINITY_SLICE);
  CHECK_STR(fmt(&r), "0-1");
  CHECK(strstr(why, "of 3") != NULL);
  q = query(&t, "0000:04:00.0", visible, 4);
  CHECK_EQ(compute(&q, "0-15", &r, NULL, 0), CCO_AFFINITY_SLICE);
  CHECK_STR(fmt(&r), "5-7");
  q = query(&t, "0000:02:00.0", visible, 4);
  CHECK_EQ(compute(&q, "0-15", &r, NULL, 0), CCO_AFFINITY_NODE);
  CHECK_STR(fmt(&r), "8-15");
  tree_free(&t);
}

TEST(uppercase_and_duplicate_bus_ids) {
  fake_tree t;
  make_two_socket(&t);
  const char* const visible[6] = {"0000:5D:00.0", "0000:1A:00.0", "0000:4c:00.0",
                                  "0000:3B:00.0", "0000:3b:00.0", "0000:1a:00.0"};
  cpu_set_t r;
  char why[256];
  cco_affinity_query q = query(&t, "0000:3B:00.0", visible, 6);
  CHECK_EQ(compute(&q, "0-127", &r, why, sizeof(why)), CCO_AFFINITY_SLICE);
  CHECK_STR(fmt(&r), "8-15,72-79");
  CHECK_STR(why, "gpu 0000:3b:00.0: slice 1 of 4 on numa node 0: cpus 8-15,72-79");
  q = query(&t, "0000:5d:00.0", visible, 6);
  CHECK_EQ(compute(&q, "0-127", &r, NULL, 0), CCO_AFFINITY_SLICE);
  CHECK_STR(fmt(&r), "24-31,88-95");
  tree_free(&t);
}

TEST(why_truncated_safely) {
  fake_tree t;
  make_two_socket(&t);
  cco_affinity_query q = query(&t, "0000:3b:00.0", g_gpus, 8);
  cpu_set_t r;
  char why[12];
  memset(why, 'x', sizeof(why));
  CHECK_EQ(compute(&q, "0-127", &r, why, 8), CCO_AFFINITY_SLICE);
  CHECK_STR(why, "gpu 000");
  CHECK_EQ(why[8], 'x');
  CHECK_EQ(compute(&q, "0-127", &r, why, 0), CCO_AFFINITY_SLICE);
  CHECK_STR(why, "gpu 000");
  tree_free(&t);
}

TEST(bad_arguments) {
  fake_tree t;
  make_two_socket(&t);
  cpu_set_t cur = cpus("0-127"), r;
  cco_affinity_kind k;
  cco_affinity_query q = query(&t, "0000:3b:00.0", g_gpus, 8);
  CHECK_EQ(cco_affinity_compute(NULL, &cur, &r, &k, NULL, 0), ccoInvalidArgument);
  CHECK_EQ(cco_affinity_compute(&q, NULL, &r, &k, NULL, 0), ccoInvalidArgument);
  CHECK_EQ(cco_affinity_compute(&q, &cur, NULL, &k, NULL, 0), ccoInvalidArgument);
  CHECK_EQ(cco_affinity_compute(&q, &cur, &r, NULL, NULL, 0), ccoInvalidArgument);
  cco_affinity_query bad = q;
  bad.gpuBusId = NULL;
  CHECK_EQ(cco_affinity_compute(&bad, &cur, &r, &k, NULL, 0), ccoInvalidArgument);
  bad.gpuBusId = "";
  CHECK_EQ(cco_affinity_compute(&bad, &cur, &r, &k, NULL, 0), ccoInvalidArgument);
  bad.gpuBusId = "../../../etc";
  CHECK_EQ(cco_affinity_compute(&bad, &cur, &r, &k, NULL, 0), ccoInvalidArgument);
  bad = q;
  bad.nVisibleGpus = 0;
  CHECK_EQ(cco_affinity_compute(&bad, &cur, &r, &k, NULL, 0), ccoInvalidArgument);
  bad.nVisibleGpus = -1;
  CHECK_EQ(cco_affinity_compute(&bad, &cur, &r, &k, NULL, 0), ccoInvalidArgument);
  bad = q;
  bad.visibleGpuBusIds = NULL;
  CHECK_EQ(cco_affinity_compute(&bad, &cur, &r, &k, NULL, 0), ccoInvalidArgument);
  const char* const withNull[2] = {"0000:3b:00.0", NULL};
  bad = query(&t, "0000:3b:00.0", withNull, 2);
  CHECK_EQ(cco_affinity_compute(&bad, &cur, &r, &k, NULL, 0), ccoInvalidArgument);
  CHECK_EQ(cco_affinity_bind_calling_thread(NULL, &k), ccoInvalidArgument);
  CHECK_EQ(cco_affinity_bind_calling_thread(&q, NULL), ccoInvalidArgument);
  tree_free(&t);
}

/* ------------------------------------------------------------------------ */
/* bind_calling_thread on this machine                                      */
/* ------------------------------------------------------------------------ */

typedef struct {
  const cco_affinity_query* q;
  ccoResult_t res;
  cco_affinity_kind kind;
  cpu_set_t before, after;
} bind_job;

static void* bind_thread(void* arg) {
  bind_job* job = arg;
  pthread_getaffinity_np(pthread_self(), sizeof(job->before), &job->before);
  job->res = cco_affinity_bind_calling_thread(job->q, &job->kind);
  pthread_getaffinity_np(pthread_self(), sizeof(job->after), &job->after);
  return NULL;
}

TEST(bind_calling_thread_real) {
  cpu_set_t processSet;
  CHECK_EQ(sched_getaffinity(0, sizeof(processSet), &processSet), 0);
  char list[4096];
  CHECK_EQ(cco_cpulist_format(&processSet, list, sizeof(list)), 0);
  fake_tree t;
  tree_init(&t);
  /* Two GPUs on node 0 whose local set is everything this process may use;
   * no siblings files, so each cpu is a core and GPU 0 gets the first half
   * (or the whole set on a single-cpu machine). */
  const char* const visible[2] = {"0000:01:00.0", "0000:02:00.0"};
  add_gpu(&t, visible[0], list, "0");
  add_gpu(&t, visible[1], list, "0");
  cco_affinity_query q = query(&t, visible[0], visible, 2);
  cpu_set_t expect;
  cco_affinity_kind expectKind;
  CHECK_EQ(cco_affinity_compute(&q, &processSet, &expect, &expectKind, NULL, 0), ccoSuccess);
  CHECK(expectKind == (CPU_COUNT(&processSet) >= 2 ? CCO_AFFINITY_SLICE : CCO_AFFINITY_NODE));

  bind_job job = {.q = &q, .res = ccoInternalError, .kind = (cco_affinity_kind)-1};
  pthread_t th;
  CHECK_EQ(pthread_create(&th, NULL, bind_thread, &job), 0);
  CHECK_EQ(pthread_join(th, NULL), 0);
  CHECK_EQ(job.res, ccoSuccess);
  CHECK_EQ(job.kind, expectKind);
  CHECK(CPU_EQUAL(&job.before, &processSet));
  CHECK(CPU_EQUAL(&job.after, &expect));

  cpu_set_t mine;
  CHECK_EQ(pthread_getaffinity_np(pthread_self(), sizeof(mine), &mine), 0);
  CHECK(CPU_EQUAL(&mine, &processSet));

  /* A missing tree leaves the thread alone. */
  fake_tree empty;
  tree_init(&empty);
  cco_affinity_query q2 = query(&empty, visible[0], visible, 2);
  job = (bind_job){.q = &q2, .res = ccoInternalError, .kind = (cco_affinity_kind)-1};
  CHECK_EQ(pthread_create(&th, NULL, bind_thread, &job), 0);
  CHECK_EQ(pthread_join(th, NULL), 0);
  CHECK_EQ(job.res, ccoSuccess);
  CHECK_EQ(job.kind, CCO_AFFINITY_UNCHANGED);
  CHECK(CPU_EQUAL(&job.after, &processSet));
  tree_free(&empty);
  tree_free(&t);
}

int main(void) { return RUN_TESTS(); }
