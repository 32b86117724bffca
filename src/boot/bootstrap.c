/* Socket bootstrap: rendezvous, link mesh, ring allgather, dissemination barrier. */
#include "boot/bootstrap.h"

#include <errno.h>
#include <stdarg.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/env.h"
#include "base/error.h"

#define CCO_HELLO_MSG_BYTES (CCO_WIRE_HEADER_BYTES + CCO_WIRE_HELLO_BYTES)
/* A connection has this long to present its HELLO, so a silent stranger
 * cannot hold up the job. */
#define CCO_HELLO_TIMEOUT 10.0
#define CCO_MAX_PENDING 64

/* ------------------------------------------------------------ helpers --- */

static int link_count(int nRanks) {
  int k = 0;
  while ((1 << k) < nRanks) k++;
  return k;
}

static int mod(int a, int n) { return ((a % n) + n) % n; }

static bool secret_equal(const uint8_t* a, const uint8_t* b) {
  uint8_t diff = 0; /* constant time: do not leak how much of a guess matched */
  for (int i = 0; i < CCO_WIRE_SECRET_BYTES; i++) diff |= (uint8_t)(a[i] ^ b[i]);
  return diff == 0;
}

static cco_io_status send_msg(int fd, uint16_t type, uint32_t seq, const void* payload,
                              uint32_t len, double deadline, int wakeFd) {
  uint8_t buf[CCO_WIRE_HEADER_BYTES + 512];
  cco_wire_encode_header(buf, type, len, seq);
  if (len <= 512) { /* one send for small messages */
    if (len) memcpy(buf + CCO_WIRE_HEADER_BYTES, payload, len);
    return cco_socket_send_all(fd, buf, CCO_WIRE_HEADER_BYTES + len, deadline, wakeFd);
  }
  cco_io_status st = cco_socket_send_all(fd, buf, CCO_WIRE_HEADER_BYTES, deadline, wakeFd);
  return st == CCO_IO_OK ? cco_socket_send_all(fd, payload, len, deadline, wakeFd) : st;
}

/* Fire-and-forget small message on a socket we are about to give up on. */
static void send_msg_nowait(int fd, uint16_t type, const void* payload, uint32_t len) {
  uint8_t buf[CCO_WIRE_HEADER_BYTES + CCO_WIRE_TEXT_MAX + 4];
  if (fd < 0 || len > sizeof(buf) - CCO_WIRE_HEADER_BYTES) return;
  cco_wire_encode_header(buf, type, len, 0);
  if (len) memcpy(buf + CCO_WIRE_HEADER_BYTES, payload, len);
  (void)!send(fd, buf, CCO_WIRE_HEADER_BYTES + len, MSG_DONTWAIT | MSG_NOSIGNAL);
}

static void send_refuse(int fd, ccoResult_t code, const char* reason) {
  uint8_t payload[4 + CCO_WIRE_TEXT_MAX];
  size_t n = strlen(reason);
  if (n > CCO_WIRE_TEXT_MAX) n = CCO_WIRE_TEXT_MAX;
  cco_wire_put_u32(payload, (uint32_t)code);
  memcpy(payload + 4, reason, n);
  send_msg_nowait(fd, CCO_MSG_REFUSE, payload, (uint32_t)(4 + n));
}

/* Records the first failure, tells the peers, and reports it. */
static ccoResult_t fail(cco_bootstrap* bs, cco_errsink* sink, ccoResult_t res, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));
static ccoResult_t fail(cco_bootstrap* bs, cco_errsink* sink, ccoResult_t res, const char* fmt, ...) {
  char msg[sizeof(bs->failReason)];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  cco_bootstrap_fail(bs, res, msg);
  return cco_error(sink, res, CCO_SUBSYS_BOOT, "%s", msg);
}

/* A peer that failed sends ABORT with its reason before it shuts its links,
 * but our own send may hit the reset first: look for the reason waiting in
 * the receive queue of that peer's link before blaming a bare close. */
static bool pending_abort_reason(int fd, char* reason, size_t size) {
  uint8_t buf[CCO_WIRE_HEADER_BYTES + CCO_WIRE_TEXT_MAX];
  cco_wire_header h;
  if (fd < 0) return false;
  ssize_t n = recv(fd, buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT);
  if (n < CCO_WIRE_HEADER_BYTES ||
      cco_wire_decode_header(buf, (size_t)n, CCO_WIRE_TEXT_MAX, &h) != CCO_WIRE_OK ||
      h.type != CCO_MSG_ABORT || (size_t)n < CCO_WIRE_HEADER_BYTES + h.length)
    return false;
  cco_wire_decode_text(buf + CCO_WIRE_HEADER_BYTES, h.length, reason, size);
  return true;
}

static ccoResult_t io_fail_peer(cco_bootstrap* bs, cco_errsink* sink, cco_io_status st, int peer,
                                const char* op, int peerFd) {
  char reason[CCO_WIRE_TEXT_MAX + 1];
  if (st == CCO_IO_CLOSED && pending_abort_reason(peerFd, reason, sizeof(reason)))
    return fail(bs, sink, ccoRemoteError, "rank %d: rank %d failed during %s: %s", bs->rank, peer,
                op, reason);
  int err = errno;
  switch (st) {
    case CCO_IO_CLOSED:
      return fail(bs, sink, ccoRemoteError,
                  "rank %d: rank %d closed its connection during %s (it exited or failed)",
                  bs->rank, peer, op);
    case CCO_IO_TIMEOUT:
      return fail(bs, sink, ccoTimeout,
                  "rank %d: no progress from rank %d for %g s during %s (CCO_BOOTSTRAP_TIMEOUT)",
                  bs->rank, peer, bs->timeout, op);
    case CCO_IO_WOKEN: {
      int cause = atomic_load_explicit(&bs->wakeResult, memory_order_acquire);
      if (cause > 0) return fail(bs, sink, (ccoResult_t)cause, "%s", bs->wakeReason);
      return fail(bs, sink, ccoInvalidUsage, "rank %d: %s interrupted: communicator aborted",
                  bs->rank, op);
    }
    default:
      return fail(bs, sink, ccoSystemError, "rank %d: socket error with rank %d during %s: %s",
                  bs->rank, peer, op, strerror(err));
  }
}

static ccoResult_t io_fail(cco_bootstrap* bs, cco_errsink* sink, cco_io_status st, int peer,
                           const char* op) {
  return io_fail_peer(bs, sink, st, peer, op, -1);
}

static const char* msg_name(uint16_t type) {
  static const char* const names[] = {"?", "hello", "refuse", "peers", "accept",
                                      "data", "barrier", "abort", "bye"};
  return type <= CCO_MSG_TYPE_MAX ? names[type] : "?";
}

/* Checks an incoming header against what this step expects. An ABORT turns
 * into the peer's reason; anything else unexpected is a collective mismatch
 * (the ranks called different collectives, or different sizes). */
static ccoResult_t check_header(cco_bootstrap* bs, cco_errsink* sink, const uint8_t* raw, int fd,
                                uint16_t type, uint32_t length, uint32_t seq, int peer,
                                const char* op) {
  cco_wire_header h;
  uint32_t maxLen = length > CCO_WIRE_TEXT_MAX + 4 ? length : CCO_WIRE_TEXT_MAX + 4;
  int err = cco_wire_decode_header(raw, CCO_WIRE_HEADER_BYTES, maxLen, &h);
  if (err != CCO_WIRE_OK)
    return fail(bs, sink, ccoRemoteError, "rank %d: bad message from rank %d during %s: %s",
                bs->rank, peer, op, cco_wire_strerror(err));
  if (h.type == CCO_MSG_ABORT) {
    uint8_t text[CCO_WIRE_TEXT_MAX];
    char reason[CCO_WIRE_TEXT_MAX + 1] = "";
    uint32_t n = h.length <= CCO_WIRE_TEXT_MAX ? h.length : 0;
    if (cco_socket_recv_all(fd, text, n, cco_deadline_after(1.0), -1) == CCO_IO_OK)
      cco_wire_decode_text(text, n, reason, sizeof(reason));
    return fail(bs, sink, ccoRemoteError, "rank %d: rank %d failed during %s: %s", bs->rank,
                peer, op, reason[0] ? reason : "(no reason given)");
  }
  if (h.type == CCO_MSG_BYE)
    return fail(bs, sink, ccoRemoteError,
                "rank %d: rank %d destroyed its communicator while this rank was in %s with it",
                bs->rank, peer, op);
  if (h.type != type || h.length != length || h.seq != seq)
    return fail(bs, sink, ccoInvalidUsage,
                "rank %d: collective mismatch with rank %d: it sent %s #%u of %u bytes while "
                "this rank is in %s #%u of %u bytes",
                bs->rank, peer, msg_name(h.type), h.seq, h.length, op, seq, length);
  return ccoSuccess;
}

/* -------------------------------------------------- accepting HELLOs --- */

typedef struct {
  int fd;
  size_t got;
  uint8_t buf[CCO_HELLO_MSG_BYTES];
  double deadline;
} pending_conn;

/* Decides whether an authenticated HELLO is wanted: returns its slot, or -1
 * with a reason (and a result code for the refused side). */
typedef int (*hello_check_fn)(cco_bootstrap* bs, const cco_wire_hello* h, void* ctx, char* reason,
                              size_t reasonSize, ccoResult_t* code);

typedef struct {
  int* slotFds;            /* accepted fds by slot (-1 = free) */
  cco_wire_hello* hellos;  /* optional: accepted HELLO by slot */
  int nSlots;
  const char* what;        /* for messages: "join" or "link" */
} accept_target;

static void drop_pending(pending_conn* pend, int* nPend, int i) {
  cco_socket_close(&pend[i].fd);
  pend[i] = pend[--*nPend];
}

static void refuse_pending(cco_bootstrap* bs, pending_conn* pend, int* nPend, int i,
                           ccoResult_t code, const char* reason) {
  CCO_WARN(BOOT, "rank %d: refused a connection: %s", bs->rank, reason);
  send_refuse(pend[i].fd, code, reason);
  drop_pending(pend, nPend, i);
}

/* Handles a complete HELLO message of pending connection i. */
static void judge_hello(cco_bootstrap* bs, pending_conn* pend, int* nPend, int i,
                        hello_check_fn check, void* ctx, accept_target* tgt, int* accepted) {
  cco_wire_header h;
  cco_wire_hello hello;
  char reason[160];
  int err = cco_wire_decode_header(pend[i].buf, CCO_WIRE_HEADER_BYTES, CCO_WIRE_HELLO_BYTES, &h);
  if (err == CCO_WIRE_OK && (h.type != CCO_MSG_HELLO || h.length != CCO_WIRE_HELLO_BYTES))
    err = CCO_WIRE_ELENGTH;
  if (err == CCO_WIRE_OK)
    err = cco_wire_decode_hello(pend[i].buf + CCO_WIRE_HEADER_BYTES, CCO_WIRE_HELLO_BYTES, &hello);
  if (err != CCO_WIRE_OK) {
    snprintf(reason, sizeof(reason), "not a cco %s hello: %s", tgt->what, cco_wire_strerror(err));
    refuse_pending(bs, pend, nPend, i, ccoInvalidUsage, reason);
    return;
  }
  if (!secret_equal(hello.secret, bs->secret)) {
    refuse_pending(bs, pend, nPend, i, ccoInvalidUsage,
                   "wrong secret: the joiner holds a different unique id");
    return;
  }
  ccoResult_t code = ccoInvalidUsage;
  int slot = check(bs, &hello, ctx, reason, sizeof(reason), &code);
  if (slot < 0 || slot >= tgt->nSlots) {
    refuse_pending(bs, pend, nPend, i, code, reason);
    return;
  }
  tgt->slotFds[slot] = pend[i].fd;
  if (tgt->hellos) tgt->hellos[slot] = hello;
  pend[i].fd = -1;
  drop_pending(pend, nPend, i);
  (*accepted)++;
}

static void missing_slots(const accept_target* tgt, char* buf, size_t size) {
  size_t o = 0;
  buf[0] = '\0';
  for (int s = 0; s < tgt->nSlots && o + 16 < size; s++)
    if (tgt->slotFds[s] == -1) o += (size_t)snprintf(buf + o, size - o, "%s%d", o ? "," : "", s);
}

/* Accepts connections on the listening socket until `wanted` authenticated
 * HELLOs were accepted into free slots; refuses the rest without stopping. */
static ccoResult_t accept_hellos(cco_bootstrap* bs, cco_errsink* sink, int wanted,
                                 hello_check_fn check, void* ctx, accept_target* tgt,
                                 double deadline) {
  pending_conn pend[CCO_MAX_PENDING];
  int nPend = 0, accepted = 0;
  ccoResult_t res = ccoSuccess;
  while (accepted < wanted) {
    struct pollfd p[CCO_MAX_PENDING + 2];
    int n = 0;
    p[n++] = (struct pollfd){bs->listenFd, POLLIN, 0};
    p[n++] = (struct pollfd){bs->wakeFd, POLLIN, 0};
    double next = deadline;
    for (int i = 0; i < nPend; i++) {
      p[n++] = (struct pollfd){pend[i].fd, POLLIN, 0};
      if (pend[i].deadline < next) next = pend[i].deadline;
    }
    double left = next - cco_time_now();
    int ms = left > 3600.0 ? 3600 * 1000 : left > 0 ? (int)(left * 1000.0) + 1 : 0;
    if (poll(p, (nfds_t)n, ms) < 0 && errno != EINTR) {
      res = io_fail(bs, sink, CCO_IO_ERROR, -1, tgt->what);
      goto out;
    }
    if (p[1].revents & POLLIN) {
      res = io_fail(bs, sink, CCO_IO_WOKEN, -1, tgt->what);
      goto out;
    }
    double now = cco_time_now();
    /* Pending connections first (indices shift as entries are dropped). */
    for (int i = nPend - 1; i >= 0; i--) {
      if (p[2 + i].revents) {
        ssize_t r = recv(pend[i].fd, pend[i].buf + pend[i].got, sizeof(pend[i].buf) - pend[i].got,
                         MSG_DONTWAIT);
        if (r > 0) pend[i].got += (size_t)r;
        else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
          CCO_INFO(BOOT, "rank %d: a connection closed before its %s hello", bs->rank, tgt->what);
          drop_pending(pend, &nPend, i);
          continue;
        }
        /* A bad header is refused as soon as its 16 bytes are in. */
        cco_wire_header h;
        if (pend[i].got >= CCO_WIRE_HEADER_BYTES &&
            cco_wire_decode_header(pend[i].buf, CCO_WIRE_HEADER_BYTES, CCO_WIRE_HELLO_BYTES, &h) !=
                CCO_WIRE_OK) {
          pend[i].got = sizeof(pend[i].buf); /* judge_hello reports the header error */
        }
        if (pend[i].got == sizeof(pend[i].buf))
          judge_hello(bs, pend, &nPend, i, check, ctx, tgt, &accepted);
      } else if (pend[i].deadline <= now) {
        refuse_pending(bs, pend, &nPend, i, ccoTimeout, "no hello in time");
      }
    }
    if (p[0].revents & POLLIN) {
      for (;;) {
        int fd = accept4(bs->listenFd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) break;
        if (nPend == CCO_MAX_PENDING) {
          CCO_WARN(BOOT, "rank %d: too many connections waiting to say hello; dropped one",
                   bs->rank);
          close(fd);
          continue;
        }
        double helloDeadline = now + CCO_HELLO_TIMEOUT;
        pend[nPend++] = (pending_conn){fd, 0, {0}, helloDeadline < deadline ? helloDeadline : deadline};
      }
    }
    if (accepted < wanted && cco_time_now() >= deadline) {
      char missing[256];
      missing_slots(tgt, missing, sizeof(missing));
      res = fail(bs, sink, ccoTimeout,
                 "rank %d: timed out after %g s waiting for %d %s connection(s) (missing %s: %s; "
                 "CCO_BOOTSTRAP_TIMEOUT)",
                 bs->rank, bs->timeout, wanted - accepted, tgt->what,
                 tgt->nSlots == bs->nRanks ? "ranks" : "links", missing);
      goto out;
    }
  }
out:
  while (nPend > 0) drop_pending(pend, &nPend, nPend - 1);
  return res;
}

static int check_join(cco_bootstrap* bs, const cco_wire_hello* h, void* ctx, char* reason,
                      size_t size, ccoResult_t* code) {
  const int* joinFds = ctx;
  if (h->purpose != CCO_HELLO_JOIN) {
    snprintf(reason, size, "expected a join hello, got a link hello");
    return -1;
  }
  if ((int)h->nRanks != bs->nRanks) {
    snprintf(reason, size, "nRanks mismatch: joiner says %u, root has %d", h->nRanks, bs->nRanks);
    return -1;
  }
  if (h->rank == 0 || h->rank >= (uint32_t)bs->nRanks) {
    snprintf(reason, size, "rank %u out of range 1..%d", h->rank, bs->nRanks - 1);
    return -1;
  }
  if (joinFds[h->rank] >= 0) {
    snprintf(reason, size, "rank %u already joined", h->rank);
    return -1;
  }
  (void)code;
  return (int)h->rank;
}

static int check_link(cco_bootstrap* bs, const cco_wire_hello* h, void* ctx, char* reason,
                      size_t size, ccoResult_t* code) {
  (void)ctx;
  (void)code;
  if (h->purpose != CCO_HELLO_LINK) {
    snprintf(reason, size, "the job is already formed (late or duplicate join of rank %u)",
             h->rank);
    return -1;
  }
  if ((int)h->nRanks != bs->nRanks || h->link >= (uint32_t)bs->nLinks ||
      (int)h->rank != mod(bs->rank - (1 << h->link), bs->nRanks)) {
    snprintf(reason, size, "unexpected link %u from rank %u (nRanks %u)", h->link, h->rank,
             h->nRanks);
    return -1;
  }
  if (bs->inFd[h->link] >= 0) {
    snprintf(reason, size, "duplicate link %u from rank %u", h->link, h->rank);
    return -1;
  }
  return (int)h->link;
}

/* ---------------------------------------------------------- rendezvous --- */

static ccoResult_t send_hello(cco_bootstrap* bs, cco_errsink* sink, int fd, uint32_t purpose,
                              uint32_t link, int peer, double deadline) {
  cco_wire_hello h;
  uint8_t payload[CCO_WIRE_HELLO_BYTES];
  memset(&h, 0, sizeof(h));
  memcpy(h.secret, bs->secret, sizeof(h.secret));
  h.nRanks = (uint32_t)bs->nRanks;
  h.rank = (uint32_t)bs->rank;
  h.purpose = purpose;
  h.link = link;
  h.addr = bs->listenAddr;
  cco_wire_encode_hello(&h, payload);
  cco_io_status st = send_msg(fd, CCO_MSG_HELLO, 0, payload, sizeof(payload), deadline, bs->wakeFd);
  return st == CCO_IO_OK ? ccoSuccess : io_fail(bs, sink, st, peer, "hello");
}

/* Reads the reply to a HELLO: `want` (PEERS or ACCEPT) or a REFUSE. */
static ccoResult_t recv_reply(cco_bootstrap* bs, cco_errsink* sink, int fd, uint16_t want,
                              void* payload, uint32_t length, int peer, double deadline) {
  uint8_t raw[CCO_WIRE_HEADER_BYTES];
  cco_wire_header h;
  cco_io_status st = cco_socket_recv_all(fd, raw, sizeof(raw), deadline, bs->wakeFd);
  if (st != CCO_IO_OK) return io_fail(bs, sink, st, peer, want == CCO_MSG_PEERS ? "join" : "link");
  uint32_t maxLen = length > CCO_WIRE_TEXT_MAX + 4 ? length : CCO_WIRE_TEXT_MAX + 4;
  int err = cco_wire_decode_header(raw, sizeof(raw), maxLen, &h);
  if (err != CCO_WIRE_OK)
    return fail(bs, sink, ccoRemoteError, "rank %d: bad reply from rank %d: %s", bs->rank, peer,
                cco_wire_strerror(err));
  if (h.type == CCO_MSG_REFUSE && h.length >= 4 && h.length <= CCO_WIRE_TEXT_MAX + 4) {
    uint8_t body[CCO_WIRE_TEXT_MAX + 4];
    char reason[CCO_WIRE_TEXT_MAX + 1];
    st = cco_socket_recv_all(fd, body, h.length, deadline, bs->wakeFd);
    if (st != CCO_IO_OK) return io_fail(bs, sink, st, peer, "refuse");
    cco_wire_decode_text(body + 4, h.length - 4, reason, sizeof(reason));
    uint32_t code = cco_wire_get_u32(body);
    ccoResult_t res = (code > 0 && code < ccoNumResults) ? (ccoResult_t)code : ccoInvalidUsage;
    return fail(bs, sink, res, "rank %d: rank %d refused this rank: %s", bs->rank, peer, reason);
  }
  if (h.type != want || h.length != length)
    return fail(bs, sink, ccoRemoteError, "rank %d: unexpected %s of %u bytes from rank %d",
                bs->rank, msg_name(h.type), h.length, peer);
  st = cco_socket_recv_all(fd, payload, length, deadline, bs->wakeFd);
  return st == CCO_IO_OK ? ccoSuccess : io_fail(bs, sink, st, peer, "join");
}

/* Rank 0: gathers every joiner's address and sends the table back. */
static ccoResult_t root_rendezvous(cco_bootstrap* bs, cco_errsink* sink, uint8_t* table,
                                   double deadline) {
  int n = bs->nRanks;
  int* joinFds = malloc(sizeof(int) * (size_t)n);
  cco_wire_hello* hellos = malloc(sizeof(cco_wire_hello) * (size_t)n);
  ccoResult_t res = ccoSuccess;
  if (!joinFds || !hellos) {
    res = cco_error(sink, ccoOutOfMemory, CCO_SUBSYS_BOOT, "rank 0: no memory for %d joiners", n);
    goto out;
  }
  for (int r = 0; r < n; r++) joinFds[r] = -1;
  joinFds[0] = -2; /* the root's own slot is never free */
  accept_target tgt = {joinFds, hellos, n, "join"};
  CCO_CHECK_GOTO(accept_hellos(bs, sink, n - 1, check_join, joinFds, &tgt, deadline), res, out);
  cco_wire_encode_addr(&bs->listenAddr, table);
  for (int r = 1; r < n; r++) cco_wire_encode_addr(&hellos[r].addr, table + r * CCO_WIRE_ADDR_BYTES);
  for (int r = 1; r < n; r++) {
    cco_io_status st = send_msg(joinFds[r], CCO_MSG_PEERS, 0, table,
                                (uint32_t)(n * CCO_WIRE_ADDR_BYTES), deadline, bs->wakeFd);
    if (st != CCO_IO_OK) {
      res = io_fail(bs, sink, st, r, "join");
      goto out;
    }
  }
out:
  if (joinFds)
    for (int r = 1; r < n; r++) cco_socket_close(&joinFds[r]);
  free(joinFds);
  free(hellos);
  return res;
}

static ccoResult_t joiner_rendezvous(cco_bootstrap* bs, cco_errsink* sink, const cco_id_info* id,
                                     uint8_t* table, double deadline) {
  int fd = -1;
  char buf[96];
  cco_io_status st = cco_socket_connect(&id->root, deadline, bs->wakeFd, &fd);
  if (st != CCO_IO_OK) {
    if (st == CCO_IO_TIMEOUT)
      return fail(bs, sink, ccoTimeout, "rank %d: could not reach the root at %s within %g s",
                  bs->rank, cco_sockaddr_str(&id->root, buf, sizeof(buf)), bs->timeout);
    return io_fail(bs, sink, st, 0, "join");
  }
  ccoResult_t res = send_hello(bs, sink, fd, CCO_HELLO_JOIN, 0, 0, deadline);
  if (res == ccoSuccess)
    res = recv_reply(bs, sink, fd, CCO_MSG_PEERS, table,
                     (uint32_t)(bs->nRanks * CCO_WIRE_ADDR_BYTES), 0, deadline);
  cco_socket_close(&fd);
  return res;
}

/* Every rank: connect to rank+2^k, accept from rank-2^k, confirm. */
static ccoResult_t form_links(cco_bootstrap* bs, cco_errsink* sink, const uint8_t* table,
                              double deadline) {
  for (int k = 0; k < bs->nLinks; k++) {
    int peer = mod(bs->rank + (1 << k), bs->nRanks);
    cco_sockaddr addr;
    if (cco_wire_decode_addr(table + peer * CCO_WIRE_ADDR_BYTES, CCO_WIRE_ADDR_BYTES, &addr) !=
        CCO_WIRE_OK)
      return fail(bs, sink, ccoRemoteError, "rank %d: bad address of rank %d in the peer table",
                  bs->rank, peer);
    cco_io_status st = cco_socket_connect(&addr, deadline, bs->wakeFd, &bs->outFd[k]);
    if (st != CCO_IO_OK) return io_fail(bs, sink, st, peer, "link connect");
    CCO_CHECK(send_hello(bs, sink, bs->outFd[k], CCO_HELLO_LINK, (uint32_t)k, peer, deadline));
  }
  accept_target tgt = {bs->inFd, NULL, bs->nLinks, "link"};
  CCO_CHECK(accept_hellos(bs, sink, bs->nLinks, check_link, NULL, &tgt, deadline));
  for (int k = 0; k < bs->nLinks; k++) {
    cco_io_status st = send_msg(bs->inFd[k], CCO_MSG_ACCEPT, 0, NULL, 0, deadline, bs->wakeFd);
    if (st != CCO_IO_OK) return io_fail(bs, sink, st, mod(bs->rank - (1 << k), bs->nRanks), "link");
  }
  for (int k = 0; k < bs->nLinks; k++)
    CCO_CHECK(recv_reply(bs, sink, bs->outFd[k], CCO_MSG_ACCEPT, NULL, 0,
                         mod(bs->rank + (1 << k), bs->nRanks), deadline));
  return ccoSuccess;
}

static ccoResult_t choose_listen_address(cco_bootstrap* bs, cco_errsink* sink, const cco_id_info* id,
                                         const char* ifnameSpec, cco_sockaddr* addr) {
  if (bs->rank == 0) {
    *addr = id->root;
    return ccoSuccess;
  }
  if (ifnameSpec && *ifnameSpec) {
    ccoResult_t res = cco_socket_pick_address(ifnameSpec, cco_sockaddr_family(&id->root), addr,
                                              NULL, 0);
    if (res != ccoSuccess)
      return cco_error(sink, res, CCO_SUBSYS_BOOT, "rank %d: %s", bs->rank,
                       cco_thread_last_error());
    cco_sockaddr_set_port(addr, 0);
    return ccoSuccess;
  }
  /* No interface named: use the one the kernel routes to the root through. */
  return cco_socket_route_source(&id->root, addr);
}

ccoResult_t cco_bootstrap_init(cco_bootstrap* bs, cco_errsink* sink, const cco_id_info* id, int nRanks,
                               int rank, double timeout, int wakeFd) {
  memset(bs, 0, sizeof(*bs));
  bs->rank = rank;
  bs->nRanks = nRanks;
  bs->nLinks = link_count(nRanks);
  bs->listenFd = -1;
  bs->timeout = timeout;
  bs->wakeFd = wakeFd;
  bs->failResult = ccoSuccess;
  memcpy(bs->secret, id->secret, sizeof(bs->secret));
  for (int k = 0; k < CCO_BOOTSTRAP_MAX_LINKS; k++) bs->outFd[k] = bs->inFd[k] = -1;
  if (bs->nLinks > CCO_BOOTSTRAP_MAX_LINKS)
    return cco_error(sink, ccoInvalidArgument, CCO_SUBSYS_BOOT, "nRanks %d is too large", nRanks);

  double deadline = cco_deadline_after(timeout);
  ccoResult_t res = ccoSuccess;
  uint8_t* table = calloc((size_t)nRanks, CCO_WIRE_ADDR_BYTES);
  if (!table) return cco_error(sink, ccoOutOfMemory, CCO_SUBSYS_BOOT, "no memory for peer table");

  cco_sockaddr want;
  CCO_CHECK_GOTO(choose_listen_address(bs, sink, id, cco_env_str(CCO_ENV_ID_CCO_SOCKET_IFNAME), &want), res, err);
  res = cco_socket_listen(&want, rank == 0, &bs->listenFd, &bs->listenAddr);
  if (res != ccoSuccess) {
    res = cco_error(sink, res, CCO_SUBSYS_BOOT, "rank %d: %s%s", rank, cco_thread_last_error(),
                    rank == 0 ? " (rank 0 must run on the host that created the unique id, and "
                                "the id must not be in use by another job)"
                              : "");
    goto err;
  }
  {
    char buf[96];
    CCO_INFO(BOOT, "rank %d/%d: listening on %s", rank, nRanks,
             cco_sockaddr_str(&bs->listenAddr, buf, sizeof(buf)));
  }
  if (nRanks > 1) {
    if (rank == 0) CCO_CHECK_GOTO(root_rendezvous(bs, sink, table, deadline), res, err);
    else CCO_CHECK_GOTO(joiner_rendezvous(bs, sink, id, table, deadline), res, err);
    CCO_CHECK_GOTO(form_links(bs, sink, table, deadline), res, err);
  }
  /* No one connects to us from now on. */
  cco_socket_close(&bs->listenFd);
  free(table);
  return ccoSuccess;
err:
  free(table);
  cco_bootstrap_destroy(bs);
  return res;
}

/* ---------------------------------------------------------- collectives --- */

static ccoResult_t check_usable(cco_bootstrap* bs, cco_errsink* sink, const char* op) {
  if (bs->failResult == ccoSuccess) return ccoSuccess;
  /* Logged once where it was found; repeating it here would only add noise. */
  return cco_error_quiet(sink, bs->failResult, "rank %d: %s on a communicator that failed earlier: %s",
                         bs->rank, op, bs->failReason);
}

/* Names the ring neighbour behind the failed fd; an ABORT from the
 * predecessor wins since it carries the root cause. */
static ccoResult_t ring_fail(cco_bootstrap* bs, cco_errsink* sink, cco_io_status st, int badFd) {
  int n = bs->nRanks;
  int peer = badFd == bs->outFd[0] ? mod(bs->rank + 1, n) : mod(bs->rank - 1, n);
  return io_fail_peer(bs, sink, st, peer, "allgather", bs->inFd[0]);
}

ccoResult_t cco_bootstrap_allgather(cco_bootstrap* bs, cco_errsink* sink, void* buf,
                                    size_t bytesPerRank) {
  CCO_CHECK(check_usable(bs, sink, "allgather"));
  if (bytesPerRank > UINT32_MAX)
    return cco_error(sink, ccoInvalidArgument, CCO_SUBSYS_BOOT,
                     "allgather of %zu bytes per rank is over the 4 GiB limit", bytesPerRank);
  uint32_t seq = ++bs->seq;
  int n = bs->nRanks, prev = mod(bs->rank - 1, n);
  char* data = buf;
  for (int step = 0; step < n - 1; step++) {
    double deadline = cco_deadline_after(bs->timeout);
    int sendIdx = mod(bs->rank - step, n), recvIdx = mod(bs->rank - step - 1, n);
    uint8_t out[CCO_WIRE_HEADER_BYTES], in[CCO_WIRE_HEADER_BYTES];
    cco_wire_encode_header(out, CCO_MSG_DATA, (uint32_t)bytesPerRank, seq);
    int bad = bs->inFd[0];
    cco_io_status st = cco_socket_sendrecv(bs->outFd[0], out, sizeof(out), bs->inFd[0], in,
                                           sizeof(in), deadline, bs->wakeFd, &bad);
    if (st != CCO_IO_OK) return ring_fail(bs, sink, st, bad);
    CCO_CHECK(check_header(bs, sink, in, bs->inFd[0], CCO_MSG_DATA, (uint32_t)bytesPerRank, seq,
                           prev, "allgather"));
    st = cco_socket_sendrecv(bs->outFd[0], data + (size_t)sendIdx * bytesPerRank, bytesPerRank,
                             bs->inFd[0], data + (size_t)recvIdx * bytesPerRank, bytesPerRank,
                             deadline, bs->wakeFd, &bad);
    if (st != CCO_IO_OK) return ring_fail(bs, sink, st, bad);
  }
  return ccoSuccess;
}

ccoResult_t cco_bootstrap_barrier(cco_bootstrap* bs, cco_errsink* sink) {
  CCO_CHECK(check_usable(bs, sink, "barrier"));
  uint32_t seq = ++bs->seq;
  for (int k = 0; k < bs->nLinks; k++) {
    double deadline = cco_deadline_after(bs->timeout);
    int from = mod(bs->rank - (1 << k), bs->nRanks);
    uint8_t out[CCO_WIRE_HEADER_BYTES], in[CCO_WIRE_HEADER_BYTES];
    cco_wire_encode_header(out, CCO_MSG_BARRIER, 0, seq);
    int bad = bs->inFd[k];
    cco_io_status st = cco_socket_sendrecv(bs->outFd[k], out, sizeof(out), bs->inFd[k], in,
                                           sizeof(in), deadline, bs->wakeFd, &bad);
    int peer = bad == bs->outFd[k] ? mod(bs->rank + (1 << k), bs->nRanks) : from;
    if (st != CCO_IO_OK) return io_fail_peer(bs, sink, st, peer, "barrier", bs->inFd[k]);
    CCO_CHECK(check_header(bs, sink, in, bs->inFd[k], CCO_MSG_BARRIER, 0, seq, from, "barrier"));
  }
  return ccoSuccess;
}

/* ------------------------------------------------------------- teardown --- */

void cco_bootstrap_fail(cco_bootstrap* bs, ccoResult_t result, const char* reason) {
  if (bs->failResult != ccoSuccess) return;
  bs->failResult = result == ccoSuccess ? ccoInternalError : result;
  snprintf(bs->failReason, sizeof(bs->failReason), "%s", reason);
  size_t n = strlen(reason);
  if (n > CCO_WIRE_TEXT_MAX) n = CCO_WIRE_TEXT_MAX;
  for (int k = 0; k < bs->nLinks; k++) {
    send_msg_nowait(bs->outFd[k], CCO_MSG_ABORT, reason, (uint32_t)n);
    send_msg_nowait(bs->inFd[k], CCO_MSG_ABORT, reason, (uint32_t)n);
    /* Shut down but keep the fds until destroy, so their numbers are not
     * reused under a thread that still holds them. */
    if (bs->outFd[k] >= 0) shutdown(bs->outFd[k], SHUT_RDWR);
    if (bs->inFd[k] >= 0) shutdown(bs->inFd[k], SHUT_RDWR);
  }
}

void cco_bootstrap_set_wake_reason(cco_bootstrap* bs, ccoResult_t result, const char* reason) {
  int unset = ccoSuccess; /* the first caller writes; -1 while it does */
  if (!atomic_compare_exchange_strong(&bs->wakeResult, &unset, -1)) return;
  snprintf(bs->wakeReason, sizeof(bs->wakeReason), "%s", reason);
  atomic_store_explicit(&bs->wakeResult, result == ccoSuccess ? ccoInternalError : result,
                        memory_order_release);
}

ccoResult_t cco_bootstrap_wake_cause(cco_bootstrap* bs, char* reason, size_t size) {
  int cause = atomic_load_explicit(&bs->wakeResult, memory_order_acquire);
  if (cause <= 0) return ccoSuccess;
  snprintf(reason, size, "%s", bs->wakeReason);
  return (ccoResult_t)cause;
}

void cco_bootstrap_destroy(cco_bootstrap* bs) {
  for (int k = 0; k < CCO_BOOTSTRAP_MAX_LINKS; k++) {
    cco_socket_close(&bs->outFd[k]);
    cco_socket_close(&bs->inFd[k]);
  }
  cco_socket_close(&bs->listenFd);
}
