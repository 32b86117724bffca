/*
 * The one table of environment variables cco reads. Nothing else in the
 * library calls getenv. `cco-info -e` prints this table with current values.
 *
 * X(NAME, ALIAS, TYPE, DEFAULT, SUBSYS, CHOICES, HELP)
 *   ALIAS   - a second accepted name (the guide's MORI_* names; docs/design.md), or NULL
 *   TYPE    - STR, BOOL, INT, DOUBLE, ENUM (CHOICES lists the accepted words)
 *   DEFAULT - text parsed like a user value
 */
#ifndef CCO_BASE_ENV_TABLE_H_
#define CCO_BASE_ENV_TABLE_H_

#define CCO_ENV_TABLE(X)                                                                    \
  X(CCO_DEBUG, NULL, ENUM, "WARN", INIT, "NONE,WARN,INFO,TRACE",                            \
    "log level: NONE, WARN, INFO or TRACE")                                                 \
  X(CCO_DEBUG_SUBSYS, NULL, STR, "", INIT, NULL,                                            \
    "comma list of subsystems to log (INIT,BOOT,MEM,LSA,SDMA,GDA,PROXY,NET,ENV,AFFINITY,"  \
    "COLL,OPS); a leading ^ logs all but those; empty logs all")                            \
  X(CCO_DEBUG_FILE, NULL, STR, "", INIT, NULL,                                              \
    "write logs to this file instead of stderr; %h is replaced by the host name, %p by "    \
    "the pid")                                                                              \
  X(CCO_SOCKET_IFNAME, "MORI_SOCKET_IFNAME", STR, "", BOOT, NULL,                          \
    "interfaces for the bootstrap sockets: comma list of name prefixes; ^ excludes the "    \
    "listed prefixes; = matches names exactly (e.g. eth,ib  ^docker,lo  =eth0)")            \
  X(CCO_SOCKET_FAMILY, NULL, ENUM, "auto", BOOT, "auto,ipv4,ipv6",                          \
    "address family of the bootstrap sockets; auto takes the first usable interface")       \
  X(CCO_BOOTSTRAP_TIMEOUT, NULL, DOUBLE, "120", BOOT, NULL,                                 \
    "seconds any blocking bootstrap step (connect, rendezvous, allgather, host barrier) "   \
    "may wait before failing with ccoTimeout; 0 waits forever (dead peers are still "       \
    "detected)")                                                                            \
  X(CCO_LIVENESS, NULL, BOOL, "1", BOOT, NULL,                                              \
    "1 runs a liveness monitor per communicator: a thread that watches the bootstrap "     \
    "links and fails the communicator (async error, abort word) when a peer dies; 0 "      \
    "turns it off")                                                                         \
  X(CCO_HOSTID, NULL, STR, "", INIT, NULL,                                                  \
    "host identity used to form the LSA team, instead of hostname + boot id (lets one "     \
    "machine play several hosts)")                                                          \
  X(CCO_PLATFORM, NULL, ENUM, "auto", INIT, "auto,cuda,host",                               \
    "memory platform: cuda, host, or auto (cuda when a GPU is usable, else host)")          \
  X(CCO_IGNORE_CPU_AFFINITY, "MORI_IGNORE_CPU_AFFINITY", BOOL, "0", AFFINITY, NULL,         \
    "1 skips the CPU binding done at communicator creation")                                \
  X(CCO_CPU_AFFINITY_NO_SPLIT, "MORI_CPU_AFFINITY_NO_SPLIT", BOOL, "0", AFFINITY, NULL,     \
    "1 binds to all GPU-local CPUs instead of this GPU's own slice of them")                \
  X(CCO_ENABLE_SDMA, "MORI_ENABLE_SDMA", BOOL, "1", SDMA, NULL,                              \
    "0 turns the SDMA (copy-engine) transport off: every SDMA call then fails with a status")  \
  X(CCO_SDMA_STREAMS, NULL, INT, "1", SDMA, NULL,                                           \
    "streams (1..8) the SDMA engine spreads its rings over; each takes one of the GPU's "   \
    "hardware queues (CUDA_DEVICE_MAX_CONNECTIONS)")                                        \
  X(CCO_SDMA_LAZY_COMPLETION, NULL, BOOL, "1", SDMA, NULL,                                  \
    "1 has the SDMA engine write a ring's completion count only when a kernel waits for "  \
    "it (ccoSdmaQuiet) or before it naps; 0 writes it after every pass")                   \
  X(CCO_SDMA_POST_FENCE, NULL, ENUM, "sys", SDMA, "auto,sys,gpu",                          \
    "scope of the fence that orders a kernel's data before its SDMA descriptor: sys, auto " \
    "(gpu when every LSA peer is this GPU, else sys), or gpu (docs/sdma.md)")              \
  X(CCO_PROGRESS_BUSY_US, NULL, INT, "0", PROXY, NULL,                                     \
    "how long (us) after its last work the SDMA engine and the GDA proxy of a GPU poll "   \
    "without a system call before they start yielding (docs/sdma.md); 0 yields at once; "  \
    "on the host platform they always yield")                                              \
  X(CCO_PROGRESS_SPIN_MAX_US, NULL, INT, "5000", PROXY, NULL,                              \
    "longest window (us) in which the SDMA engine and the GDA proxy yield instead of "     \
    "napping after their last work; the window follows the gaps between bursts up to "     \
    "this (docs/sdma.md); 0 keeps it at 200 us")                                           \
  X(CCO_UNIQUE_ID, NULL, STR, "", INIT, NULL,                                               \
    "unique id in hex text, set by ccorun; read by ccoCommCreateFromEnv")                   \
  X(CCO_NRANKS, NULL, INT, "-1", INIT, NULL,                                                \
    "number of ranks of the job, set by ccorun; read by ccoCommCreateFromEnv")              \
  X(CCO_RANK, NULL, INT, "-1", INIT, NULL,                                                  \
    "rank of this process, set by ccorun; read by ccoCommCreateFromEnv")                    \
  X(CCO_LOCAL_RANK, NULL, INT, "-1", INIT, NULL,                                            \
    "rank among the ranks ccorun started on this host, set by ccorun; a thread that chose " \
    "no GPU gets GPU CCO_LOCAL_RANK modulo the visible GPUs")                               \
  X(CCO_NET_PROVIDER, NULL, STR, "tcp;ofi_rxm", NET, NULL,                                  \
    "libfabric provider of the network engine (FI_EP_RDM): tcp;ofi_rxm, verbs;ofi_rxm, "   \
    "efa, ...")                                                                             \
  X(CCO_NET_DEVICES, "MORI_RDMA_DEVICES", STR, "", NET, NULL,                               \
    "comma list of libfabric domain names the network engine may use (e.g. mlx5_0,eth0); " \
    "empty accepts the provider's first")                                                   \
  X(CCO_NET_TC, "MORI_RDMA_TC", INT, "-1", NET, NULL,                                       \
    "traffic class of the network engine: 0-63 is a DSCP value, 256 and up a libfabric "   \
    "FI_TC_* value; -1 keeps the provider default")                                         \
  X(CCO_NET_SL, "MORI_RDMA_SL", INT, "-1", NET, NULL,                                       \
    "IB service level; libfabric 1.17 has no field for it, so it is ignored with a "       \
    "warning; -1 keeps the default")                                                        \
  X(CCO_NET_MAX_MSG, NULL, INT, "0", NET, NULL,                                             \
    "largest single network write/read in bytes (callers split larger transfers); 0 "      \
    "uses the provider's limit")                                                            \
  X(CCO_NET_NOTIFY, NULL, BOOL, "1", NET, NULL,                                             \
    "writes that notify their target (8 bytes of remote completion data) where the "       \
    "provider offers them; the staged GDA path then announces a message with its write "    \
    "instead of a second operation; 0 always uses the second operation (an atomic add)")   \
  X(CCO_GDA_PATH, NULL, ENUM, "auto", GDA, "auto,direct,staged",                            \
    "how GDA reaches window memory: direct (the network engine registers it; host memory, " \
    "or a provider with FI_HMEM), staged (pinned bounce buffers and copies at both ends), " \
    "or auto (direct on the host platform, staged on GPUs)")                                \
  X(CCO_GDA_INLINE_BYTES, NULL, INT, "2048", GDA, NULL,                                     \
    "staged GDA path: puts of at most this many bytes travel inside the target's inbox, "  \
    "behind their message (one network write, no landing zone); 0..4096, 0 turns it off"  \
    " (ranks may differ)")                                                                  \
  X(CCO_GDA_STAGING_BYTES, NULL, INT, "8388608", GDA, NULL,                                 \
    "staged GDA path: bytes of landing zone per source rank; the outgoing and reply areas " \
    "take twice that; chunks are a quarter of it, at most 1 MiB (every rank must use the "  \
    "same value)")                                                                          \
  X(CCO_ALGO, NULL, STR, "", COLL, NULL,                                                    \
    "collectives' algorithm: empty or auto (chosen by size and LSA size); a name "         \
    "(oneshot, ll, twoshot, push, pull) used by every call that can use it; or "            \
    "collective=name items (allreduce=ll,allgather=push), refused by a call that cannot "  \
    "use that algorithm (every rank must use the same value)")                              \
  X(CCO_COLL_PARTS, NULL, INT, "0", COLL, NULL,                                             \
    "parts (GPU blocks, or CPU threads on the host platform) of every collective call; 0 "  \
    "takes the platform default (16 on GPUs, 2 on the host), capped at the blocks' limit "  \
    "and at what fits on the GPU (every rank must use the same value)")                     \
  X(CCO_COLL_TIMEOUT, NULL, DOUBLE, "120", COLL, NULL,                                      \
    "host platform: seconds a collective's CPU workers may run before the communicator "   \
    "fails with ccoTimeout (ranks that called different collectives); 0 waits forever")    \
  X(CCO_MOE_COMBINE_LOADS, NULL, ENUM, "12", OPS, "4,8,12",                                 \
    "16-byte loads each lane of the MoE combine keeps in flight (4, 8 or 12), over 2 "      \
    "ranks at a time up to 2 ranks, over 4 from 3 on; read when an op is made")

#endif /* CCO_BASE_ENV_TABLE_H_ */
