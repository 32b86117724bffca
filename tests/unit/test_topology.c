/* Unit tests for cco_topology_build on fabricated rank infos. */
#include "boot/topology.h"

#include <stdint.h>
#include <string.h>

#include "test.h"

#define MAXR 64

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */
/* ------------------------------------------------------------------------ */

/* infos[r].hostId = hosts[r]. */
static void make_infos(cco_rank_info* infos, const char* const* hosts, int n) {
  memset(infos, 0, sizeof(cco_rank_info) * (size_t)n);
  for (int r = 0; r < n; r++) {
    snprintf(infos[r].hostId, sizeof(infos[r].hostId), "%s", hosts[r]);
    snprintf(infos[r].hostname, sizeof(infos[r].hostname), "h%d", r);
    infos[r].pid = 1000 + r;
  }
}

/* Brute-force model of the teams, straight from their definitions. */
typedef struct {
  int nNodes, node, lsaSize, lsaRank;
  int nodeOf[MAXR], lsaRankOf[MAXR];
  int n[ccoNumTeams];
  int members[ccoNumTeams][MAXR];
} model;

static void build_model(const char* const* hosts, int nRanks, int rank, model* m) {
  memset(m, 0, sizeof(*m));
  /* Host index: order of first appearance (= lowest world rank). */
  for (int r = 0; r < nRanks; r++) {
    int first = r;
    for (int q = 0; q < r; q++)
      if (!strcmp(hosts[q], hosts[r])) {
        first = q;
        break;
      }
    if (first == r) m->nodeOf[r] = m->nNodes++;
    else m->nodeOf[r] = m->nodeOf[first];
    int idx = 0;
    for (int q = 0; q < r; q++) idx += !strcmp(hosts[q], hosts[r]);
    m->lsaRankOf[r] = idx;
  }
  m->node = m->nodeOf[rank];
  m->lsaRank = m->lsaRankOf[rank];
  for (int r = 0; r < nRanks; r++) m->lsaSize += !strcmp(hosts[r], hosts[rank]);
  for (int r = 0; r < nRanks; r++) {
    int sameHost = !strcmp(hosts[r], hosts[rank]);
    m->members[ccoTeamWorld][m->n[ccoTeamWorld]++] = r;
    if (sameHost) m->members[ccoTeamLsa][m->n[ccoTeamLsa]++] = r;
    if (r == rank || !sameHost) m->members[ccoTeamCrossNode][m->n[ccoTeamCrossNode]++] = r;
    if (m->lsaRankOf[r] == m->lsaRank) m->members[ccoTeamRail][m->n[ccoTeamRail]++] = r;
  }
}

/* Expected stride of a sorted member list: the common difference when the
 * members form an arithmetic progression (a single member counts as one,
 * with stride 1), else 0. */
static int model_stride(const int* members, int n) {
  if (n < 2) return 1;
  int d = members[1] - members[0];
  for (int i = 2; i < n; i++)
    if (members[i] - members[i - 1] != d) return 0;
  return d;
}

static int is_member(const int* members, int n, int r) {
  for (int i = 0; i < n; i++)
    if (members[i] == r) return 1;
  return 0;
}

/* Checks everything cco_topology_build reports for `rank` against the model,
 * and names the layout size and rank when something failed. */
static void check_rank(const char* const* hosts, int nRanks, int rank, const cco_topology* t) {
  model m;
  build_model(hosts, nRanks, rank, &m);
  int before = cco_test_failed_;
  cco_test_failed_ = 0;
  CHECK_EQ(t->nRanks, nRanks);
  CHECK_EQ(t->rank, rank);
  CHECK_EQ(t->nNodes, m.nNodes);
  CHECK_EQ(t->node, m.node);
  CHECK_EQ(t->lsaSize, m.lsaSize);
  CHECK_EQ(t->lsaRank, m.lsaRank);
  for (int r = 0; r < nRanks; r++) {
    CHECK_EQ(t->nodeOf[r], m.nodeOf[r]);
    CHECK_EQ(t->lsaRankOf[r], m.lsaRankOf[r]);
  }
  for (int k = 0; k < ccoNumTeams; k++) {
    const ccoTeam* team = &t->teams[k];
    const int* mm = m.members[k];
    int n = m.n[k];
    CHECK_EQ(team->nRanks, n);
    int myIndex = -1;
    for (int i = 0; i < n; i++)
      if (mm[i] == rank) myIndex = i;
    CHECK(myIndex >= 0); /* every team contains this rank */
    CHECK_EQ(team->rank, myIndex);
    CHECK_EQ(team->stride, model_stride(mm, n));
    for (int i = 0; i < n && i < team->nRanks; i++) {
      CHECK_EQ(t->members[k][i], mm[i]);
      CHECK_EQ(cco_topology_team_to_world(t, (ccoTeamKind_t)k, i), mm[i]);
      CHECK_EQ(cco_topology_world_to_team(t, (ccoTeamKind_t)k, mm[i]), i);
      if (team->stride != 0) CHECK_EQ(mm[i], rank + (i - team->rank) * team->stride);
    }
    for (int r = 0; r < nRanks; r++)
      if (!is_member(mm, n, r)) CHECK_EQ(cco_topology_world_to_team(t, (ccoTeamKind_t)k, r), -1);
    CHECK_EQ(cco_topology_team_to_world(t, (ccoTeamKind_t)k, -1), -1);
    CHECK_EQ(cco_topology_team_to_world(t, (ccoTeamKind_t)k, n), -1);
    CHECK_EQ(cco_topology_team_to_world(t, (ccoTeamKind_t)k, n + 100), -1);
    CHECK_EQ(cco_topology_team_to_world(t, (ccoTeamKind_t)k, INT32_MIN), -1);
    CHECK_EQ(cco_topology_world_to_team(t, (ccoTeamKind_t)k, -1), -1);
    CHECK_EQ(cco_topology_world_to_team(t, (ccoTeamKind_t)k, nRanks), -1);
    CHECK_EQ(cco_topology_world_to_team(t, (ccoTeamKind_t)k, INT32_MAX), -1);
  }
  CHECK_EQ(cco_topology_team_to_world(t, ccoNumTeams, 0), -1);
  CHECK_EQ(cco_topology_team_to_world(t, (ccoTeamKind_t)-1, 0), -1);
  CHECK_EQ(cco_topology_world_to_team(t, ccoNumTeams, rank), -1);
  CHECK_EQ(cco_topology_world_to_team(t, (ccoTeamKind_t)-1, rank), -1);
  if (cco_test_failed_) fprintf(stderr, "  (above: nRanks %d, rank %d)\n", nRanks, rank);
  cco_test_failed_ |= before;
}

/* Builds the topology of every rank of a layout and checks it against the
 * model; `each` (may be NULL) adds layout-specific checks. */
typedef void (*rank_check_fn)(int rank, const cco_topology* t);
static void check_layout(const char* const* hosts, int nRanks, rank_check_fn each) {
  cco_rank_info infos[MAXR];
  make_infos(infos, hosts, nRanks);
  for (int rank = 0; rank < nRanks; rank++) {
    cco_topology t;
    memset(&t, 0xCD, sizeof(t));
    ccoResult_t r = cco_topology_build(infos, nRanks, rank, &t);
    CHECK_EQ(r, ccoSuccess);
    if (r != ccoSuccess) continue;
    check_rank(hosts, nRanks, rank, &t);
    if (each) each(rank, &t);
    cco_topology_free(&t);
  }
}

static void check_team(const cco_topology* t, ccoTeamKind_t k, int nRanks, int rank, int stride) {
  CHECK_EQ(t->teams[k].nRanks, nRanks);
  CHECK_EQ(t->teams[k].rank, rank);
  CHECK_EQ(t->teams[k].stride, stride);
}

/* ------------------------------------------------------------------------ */
/* Layouts                                                                  */
/* ------------------------------------------------------------------------ */

static const char* const k_single8[] = {"A", "A", "A", "A", "A", "A", "A", "A"};
static void single8_each(int rank, const cco_topology* t) {
  CHECK_EQ(t->nNodes, 1);
  CHECK_EQ(t->node, 0);
  CHECK_EQ(t->lsaRank, rank);
  CHECK_EQ(t->lsaSize, 8);
  check_team(t, ccoTeamWorld, 8, rank, 1);
  check_team(t, ccoTeamLsa, 8, rank, 1);
  check_team(t, ccoTeamCrossNode, 1, 0, 1);
  check_team(t, ccoTeamRail, 1, 0, 1);
  CHECK_EQ(cco_topology_team_to_world(t, ccoTeamCrossNode, 0), rank);
  CHECK_EQ(cco_topology_team_to_world(t, ccoTeamRail, 0), rank);
  CHECK_EQ(cco_topology_world_to_team(t, ccoTeamCrossNode, (rank + 1) % 8), -1);
}
TEST(single_host_8) { check_layout(k_single8, 8, single8_each); }

static const char* const k_blocked[] = {"hostA", "hostA", "hostA", "hostA",
                                        "hostB", "hostB", "hostB", "hostB"};
static void blocked_each(int rank, const cco_topology* t) {
  CHECK_EQ(t->nNodes, 2);
  CHECK_EQ(t->node, rank / 4);
  CHECK_EQ(t->lsaRank, rank % 4);
  CHECK_EQ(t->lsaSize, 4);
  check_team(t, ccoTeamWorld, 8, rank, 1);
  check_team(t, ccoTeamLsa, 4, rank % 4, 1);
  check_team(t, ccoTeamRail, 2, rank / 4, 4);
  /* Cross-node: self plus the other host's four ranks. It is arithmetic only
   * when self is adjacent to the other block (ranks 3 and 4). */
  int crossStride = (rank == 3 || rank == 4) ? 1 : 0;
  check_team(t, ccoTeamCrossNode, 5, rank < 4 ? 0 : 4, crossStride);
  int other = rank < 4 ? 4 : 0;
  for (int q = 0; q < 4; q++) {
    CHECK(cco_topology_world_to_team(t, ccoTeamCrossNode, other + q) >= 0);
    CHECK_EQ(cco_topology_world_to_team(t, ccoTeamLsa, (rank / 4) * 4 + q), q);
  }
  for (int q = 0; q < 4; q++) {
    int sameHost = (rank / 4) * 4 + q;
    if (sameHost != rank) CHECK_EQ(cco_topology_world_to_team(t, ccoTeamCrossNode, sameHost), -1);
  }
  CHECK_EQ(cco_topology_team_to_world(t, ccoTeamRail, 0), rank % 4);
  CHECK_EQ(cco_topology_team_to_world(t, ccoTeamRail, 1), rank % 4 + 4);
}
TEST(two_hosts_blocked) { check_layout(k_blocked, 8, blocked_each); }

static const char* const k_roundrobin[] = {"A", "B", "A", "B", "A", "B", "A", "B"};
static void roundrobin_each(int rank, const cco_topology* t) {
  CHECK_EQ(t->nNodes, 2);
  CHECK_EQ(t->node, rank % 2);
  CHECK_EQ(t->lsaRank, rank / 2);
  CHECK_EQ(t->lsaSize, 4);
  check_team(t, ccoTeamLsa, 4, rank / 2, 2);
  check_team(t, ccoTeamRail, 2, rank % 2, 1);
  /* Cross-node: self plus the other parity's ranks, of which (rank + 1) / 2
   * are below self. */
  check_team(t, ccoTeamCrossNode, 5, (rank + 1) / 2, 0);
  CHECK_EQ(cco_topology_team_to_world(t, ccoTeamRail, 0), rank - rank % 2);
  CHECK_EQ(cco_topology_team_to_world(t, ccoTeamLsa, 3), 6 + rank % 2);
}
TEST(two_hosts_round_robin) { check_layout(k_roundrobin, 8, roundrobin_each); }

/* Host A has ranks 0,1,5; host B has 2,3,4,6,7. */
static const char* const k_irregular[] = {"A", "A", "B", "B", "B", "A", "B", "B"};
static void irregular_each(int rank, const cco_topology* t) {
  static const int node[8] = {0, 0, 1, 1, 1, 0, 1, 1};
  static const int lsaRank[8] = {0, 1, 0, 1, 2, 2, 3, 4};
  static const int railSize[8] = {2, 2, 2, 2, 2, 2, 1, 1};
  static const int railStride[8] = {2, 2, 2, 2, 1, 1, 1, 1};
  CHECK_EQ(t->nNodes, 2);
  CHECK_EQ(t->node, node[rank]);
  CHECK_EQ(t->lsaRank, lsaRank[rank]);
  CHECK_EQ(t->lsaSize, node[rank] == 0 ? 3 : 5);
  check_team(t, ccoTeamLsa, node[rank] == 0 ? 3 : 5, lsaRank[rank], 0);
  CHECK_EQ(t->teams[ccoTeamRail].nRanks, railSize[rank]);
  CHECK_EQ(t->teams[ccoTeamRail].stride, railStride[rank]);
  /* LSA members in world order. */
  if (node[rank] == 0) {
    CHECK_EQ(cco_topology_team_to_world(t, ccoTeamLsa, 2), 5);
    CHECK_EQ(cco_topology_world_to_team(t, ccoTeamLsa, 5), 2);
  } else {
    CHECK_EQ(cco_topology_team_to_world(t, ccoTeamLsa, 3), 6);
    CHECK_EQ(cco_topology_world_to_team(t, ccoTeamLsa, 5), -1);
  }
  /* Cross-node for rank 5: {2,3,4,5,6,7} is arithmetic. */
  if (rank == 5) check_team(t, ccoTeamCrossNode, 6, 3, 1);
  if (rank == 2) check_team(t, ccoTeamCrossNode, 4, 2, 0); /* {0,1,2,5} */
}
TEST(irregular_placement) { check_layout(k_irregular, 8, irregular_each); }

/* Host A: ranks 0-4, host B: 5-7. */
static const char* const k_unequal[] = {"A", "A", "A", "A", "A", "B", "B", "B"};
static void unequal_each(int rank, const cco_topology* t) {
  int onA = rank < 5;
  int lsa = onA ? rank : rank - 5;
  CHECK_EQ(t->lsaSize, onA ? 5 : 3);
  check_team(t, ccoTeamLsa, onA ? 5 : 3, lsa, 1);
  if (lsa < 3) check_team(t, ccoTeamRail, 2, onA ? 0 : 1, 5);
  else check_team(t, ccoTeamRail, 1, 0, 1);
  check_team(t, ccoTeamCrossNode, onA ? 4 : 6, onA ? 0 : 5, (rank == 4 || rank == 5) ? 1 : 0);
}
TEST(unequal_host_sizes) { check_layout(k_unequal, 8, unequal_each); }

static const char* const k_one[] = {"only"};
static void one_each(int rank, const cco_topology* t) {
  CHECK_EQ(rank, 0);
  CHECK_EQ(t->nNodes, 1);
  CHECK_EQ(t->lsaSize, 1);
  for (int k = 0; k < ccoNumTeams; k++) {
    check_team(t, (ccoTeamKind_t)k, 1, 0, 1);
    CHECK_EQ(cco_topology_team_to_world(t, (ccoTeamKind_t)k, 0), 0);
    CHECK_EQ(cco_topology_team_to_world(t, (ccoTeamKind_t)k, 1), -1);
    CHECK_EQ(cco_topology_world_to_team(t, (ccoTeamKind_t)k, 0), 0);
  }
}
TEST(one_rank) { check_layout(k_one, 1, one_each); }

static const char* const k_three[] = {"x", "x", "y", "y", "z", "z"};
static void three_each(int rank, const cco_topology* t) {
  CHECK_EQ(t->nNodes, 3);
  CHECK_EQ(t->node, rank / 2);
  check_team(t, ccoTeamLsa, 2, rank % 2, 1);
  check_team(t, ccoTeamRail, 3, rank / 2, 2);
  /* Rank 1: {1,2,3,4,5} and rank 4: {0,1,2,3,4} are arithmetic. */
  check_team(t, ccoTeamCrossNode, 5, rank < 2 ? 0 : rank < 4 ? 2 : 4,
             (rank == 1 || rank == 4) ? 1 : 0);
}
TEST(three_hosts) { check_layout(k_three, 6, three_each); }

/* Node numbers follow the lowest world rank, not the host names. */
static const char* const k_three_names[] = {"zeta", "alpha", "mid", "alpha", "zeta", "mid",
                                            "mid", "alpha", "zeta"};
static void three_names_each(int rank, const cco_topology* t) {
  static const int node[9] = {0, 1, 2, 1, 0, 2, 2, 1, 0};
  static const int lsaRank[9] = {0, 0, 0, 1, 1, 1, 2, 2, 2};
  CHECK_EQ(t->nNodes, 3);
  CHECK_EQ(t->node, node[rank]);
  /* zeta = {0,4,8} (stride 4), alpha = {1,3,7}, mid = {2,5,6} (not arithmetic). */
  check_team(t, ccoTeamLsa, 3, lsaRank[rank], node[rank] == 0 ? 4 : 0);
  /* Rails {0,1,2}, {3,4,5}, {6,7,8}. */
  check_team(t, ccoTeamRail, 3, rank % 3, 1);
  CHECK_EQ(cco_topology_team_to_world(t, ccoTeamRail, 0), rank - rank % 3);
}
TEST(three_hosts_names_vs_order) { check_layout(k_three_names, 9, three_names_each); }

/* Host ids compare over their whole length, not a prefix. */
TEST(long_host_ids) {
  char a[CCO_HOSTID_BYTES], b[CCO_HOSTID_BYTES];
  memset(a, 'h', sizeof(a) - 1);
  a[sizeof(a) - 1] = '\0';
  memcpy(b, a, sizeof(b));
  b[sizeof(b) - 2] = 'i';
  const char* hosts[4] = {a, b, a, b};
  check_layout(hosts, 4, NULL);
  cco_rank_info infos[4];
  make_infos(infos, hosts, 4);
  cco_topology t;
  CHECK_EQ(cco_topology_build(infos, 4, 0, &t), ccoSuccess);
  CHECK_EQ(t.nNodes, 2);
  CHECK_EQ(t.lsaSize, 2);
  cco_topology_free(&t);
  /* The "hostname|bootid" form: same name, different boot id = two hosts. */
  const char* pairs[4] = {"node1|aaaa", "node1|bbbb", "node1|aaaa", "node1|bbbb"};
  make_infos(infos, pairs, 4);
  CHECK_EQ(cco_topology_build(infos, 4, 3, &t), ccoSuccess);
  CHECK_EQ(t.nNodes, 2);
  CHECK_EQ(t.node, 1);
  CHECK_EQ(t.lsaRank, 1);
  cco_topology_free(&t);
}

/* Random layouts against the model. */
static uint64_t g_rng = 0x2545F4914F6CDD1Dull;
static uint64_t rnd(void) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return g_rng;
}

TEST(random_layouts) {
  static const char* const names[] = {"h0", "h1", "h2", "h3", "h4", "h5"};
  for (int iter = 0; iter < 300 && !cco_test_failed_; iter++) {
    int n = 1 + (int)(rnd() % 24);
    int nHosts = 1 + (int)(rnd() % 6);
    const char* hosts[MAXR];
    int mode = (int)(rnd() % 3);
    for (int r = 0; r < n; r++) {
      if (mode == 0) hosts[r] = names[rnd() % (uint64_t)nHosts];       /* scattered */
      else if (mode == 1) hosts[r] = names[r % nHosts];                /* round robin */
      else hosts[r] = names[(r * nHosts) / n];                         /* blocked */
    }
    check_layout(hosts, n, NULL);
  }
}

/* ------------------------------------------------------------------------ */
/* Arguments and lifetime                                                   */
/* ------------------------------------------------------------------------ */

TEST(bad_arguments) {
  cco_rank_info infos[4];
  make_infos(infos, k_blocked, 4);
  cco_topology t;
  memset(&t, 0, sizeof(t));
  CHECK_EQ(cco_topology_build(NULL, 4, 0, &t), ccoInvalidArgument);
  CHECK_EQ(cco_topology_build(infos, 4, 0, NULL), ccoInvalidArgument);
  CHECK_EQ(cco_topology_build(infos, 0, 0, &t), ccoInvalidArgument);
  CHECK_EQ(cco_topology_build(infos, -1, 0, &t), ccoInvalidArgument);
  CHECK_EQ(cco_topology_build(infos, 4, -1, &t), ccoInvalidArgument);
  CHECK_EQ(cco_topology_build(infos, 4, 4, &t), ccoInvalidArgument);
  CHECK_EQ(cco_topology_build(infos, 4, INT32_MAX, &t), ccoInvalidArgument);
  CHECK(t.nodeOf == NULL); /* nothing allocated on failure */
  CHECK_EQ(cco_topology_build(infos, 4, 3, &t), ccoSuccess);
  cco_topology_free(&t);
}

TEST(free_is_idempotent) {
  cco_rank_info infos[8];
  make_infos(infos, k_roundrobin, 8);
  cco_topology t;
  CHECK_EQ(cco_topology_build(infos, 8, 5, &t), ccoSuccess);
  cco_topology_free(&t);
  CHECK(t.nodeOf == NULL && t.lsaRankOf == NULL);
  for (int k = 0; k < ccoNumTeams; k++) CHECK(t.members[k] == NULL);
  cco_topology_free(&t); /* second free: no double free under ASan */
  cco_topology_free(NULL);
  /* A rebuild into the freed struct works. */
  CHECK_EQ(cco_topology_build(infos, 8, 2, &t), ccoSuccess);
  CHECK_EQ(t.rank, 2);
  cco_topology_free(&t);
}

int main(void) { return RUN_TESTS(); }
