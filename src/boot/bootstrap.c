/* Socket bootstrap: rendezvous, link mesh, ring allgather, dissemination barrier. */
#include "boot/bootstrap.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/env.h"
#include "base/error.h"

#define CCO_HELLO_MSG_BYTES (CCO_WIRE_HEADER_BYTES + CCO_WIRE_HELLO_BYTES)
/* The largest REFUSE or ABORT message. */
#define CCO_NOTICE_MSG_BYTES (CCO_WIRE_HEADER_BYTES + 4 + CCO_WIRE_TEXT_MAX)
/* A connection has this long to present its HELLO. */
#define CCO_HELLO_TIMEOUT 10.0
/* Connections waiting to present their HELLO, at most (fewer when the
 * process's fd limit is low: a quarter of it, and at least the minimum).
 * When a new one comes and there is no room, the oldest waiting one is
 * evicted: a stranger that says nothing can hold a place only until newer
 * connections need it, and a real rank (whose HELLO follows its connect at
 * once) is judged as soon as it is accepted. Any number of silent strangers
 * therefore only costs the time to accept and close them, and most of that
 * is spent while the rank waits anyway. */
#define CCO_MIN_PENDING 16
#define CCO_MAX_PENDING 32
/* Connections accepted per round of the creation loop (half the room at
 * most): each one is read at once and again in the next round before it can
 * become the oldest. */
/* How long a rank that failed before it could join tries to tell the root. */
#define CCO_REPORT_TIMEOUT 5.0
/* How long a failing rank spends finishing a message it was in the middle
 * of sending, before it writes its ABORT behind it. */
#define CCO_TX_FINISH_TIMEOUT 0.5
/* A link peer that refuses connections has failed or died. If it failed,
 * its reason reaches the root and comes back from there within moments:
 * the refusal waits this long for it before it is reported as the cause. */
#define CCO_REFUSED_GRACE 0.25
/* A joiner tells the root that its links are formed with an ACCEPT message
 * on its join connection. */
#define CCO_MSG_READY CCO_MSG_ACCEPT

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

/* ---------------------------------------------------- tracked sending --- */

/* Every message this rank sends goes through bs->tx while it is under way,
 * so that a failure in the middle of it never writes an ABORT into it (the
 * reader would take the ABORT for the rest of the message). */
static void tx_begin(cco_bootstrap* bs, int fd, uint16_t type, uint32_t seq, const void* payload,
                     uint32_t len) {
  cco_bootstrap_tx* t = &bs->tx;
  t->fd = fd;
  cco_wire_encode_header(t->head, type, len, seq);
  t->sent = 0;
  if (len <= sizeof(t->head) - CCO_WIRE_HEADER_BYTES) { /* small: one buffer, one send */
    if (len) memcpy(t->head + CCO_WIRE_HEADER_BYTES, payload, len);
    t->headLen = CCO_WIRE_HEADER_BYTES + len;
    t->body = NULL;
    t->bodyLen = 0;
  } else {
    t->headLen = CCO_WIRE_HEADER_BYTES;
    t->body = payload;
    t->bodyLen = len;
  }
}

static void tx_end(cco_bootstrap* bs) { bs->tx.fd = -1; }

/* Sends the rest of bs->tx. */
static cco_io_status tx_run(cco_bootstrap* bs, double deadline, int wakeFd) {
  cco_bootstrap_tx* t = &bs->tx;
  cco_io_status st = CCO_IO_OK;
  if (t->sent < t->headLen) {
    cco_socket_xfer x = {t->fd, t->head, t->headLen, t->sent, -1, NULL, 0, 0};
    st = cco_socket_xfer_run(&x, deadline, wakeFd, NULL);
    t->sent = x.sent;
  }
  if (st == CCO_IO_OK && t->bodyLen) {
    cco_socket_xfer x = {t->fd, t->body, t->bodyLen, t->sent - t->headLen, -1, NULL, 0, 0};
    st = cco_socket_xfer_run(&x, deadline, wakeFd, NULL);
    t->sent = t->headLen + x.sent;
  }
  return st;
}

/* Whether the stream of bs->tx is at a message boundary, so an ABORT can
 * follow: nothing of the message was sent, or the rest of it could be sent
 * now. The bytes are the real message (a block this rank holds, a token of
 * a barrier round it reached), so the reader gets it whole and then the
 * ABORT. */
static bool tx_at_boundary(cco_bootstrap* bs) {
  cco_bootstrap_tx* t = &bs->tx;
  if (t->fd < 0 || t->sent == 0 || t->sent >= t->headLen + t->bodyLen) return true;
  return tx_run(bs, cco_time_now() + CCO_TX_FINISH_TIMEOUT, -1) == CCO_IO_OK;
}

static cco_io_status send_msg(cco_bootstrap* bs, int fd, uint16_t type, uint32_t seq,
                              const void* payload, uint32_t len, double deadline) {
  tx_begin(bs, fd, type, seq, payload, len);
  cco_io_status st = tx_run(bs, deadline, bs->wakeFd);
  if (st == CCO_IO_OK) tx_end(bs);
  return st; /* on failure bs->tx stays, for cco_bootstrap_fail */
}

/* Fire-and-forget small message on a socket we are about to give up on. */
static void send_msg_nowait(int fd, uint16_t type, const void* payload, uint32_t len) {
  uint8_t buf[CCO_NOTICE_MSG_BYTES];
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

/* ------------------------------------------------------------- failing --- */

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

/* A failure of I/O with `peer` on peerFd. When a link closed, an ABORT
 * waiting on it (the peer's reason), or else on otherFd (from otherPeer, a
 * neighbour that failed first), tells why. */
static ccoResult_t io_fail_peer(cco_bootstrap* bs, cco_errsink* sink, cco_io_status st, int peer,
                                const char* op, int peerFd, int otherFd, int otherPeer) {
  char reason[CCO_WIRE_TEXT_MAX + 1];
  int err = errno;
  if (st == CCO_IO_CLOSED && pending_abort_reason(peerFd, reason, sizeof(reason)))
    return fail(bs, sink, ccoRemoteError, "rank %d: rank %d failed during %s: %s", bs->rank, peer,
                op, reason);
  if (st == CCO_IO_CLOSED && otherFd != peerFd &&
      pending_abort_reason(otherFd, reason, sizeof(reason)))
    return fail(bs, sink, ccoRemoteError, "rank %d: rank %d failed during %s: %s", bs->rank,
                otherPeer, op, reason);
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
  return io_fail_peer(bs, sink, st, peer, op, -1, -1, -1);
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
    return fail(bs, sink, ccoRemoteError,
                "rank %d: unreadable message from rank %d during %s (%s): the link is out of step",
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

/* ------------------------------------------------------------ creation --- */

/* Creation is one event loop per rank. It serves, all at once: the
 * listening socket and the connections waiting to present a HELLO; the
 * joiner's connection to the root (connect, HELLO, the peer table, then
 * watching for an ABORT or a close), or the root's connections to every
 * joined rank (watched until that rank has formed its links); and this
 * rank's links (connect, HELLO, ACCEPT). Nothing blocks for long but the
 * transfer of the peer table, so a failure anywhere reaches this rank as
 * soon as it happens. */

typedef struct {
  int fd;
  size_t got;
  double since, deadline;
  uint8_t buf[CCO_HELLO_MSG_BYTES];
} pending_conn;

/* A small message (REFUSE, ABORT, ACCEPT, or the header of PEERS) read a
 * piece at a time. */
typedef struct {
  size_t got;
  uint8_t buf[CCO_NOTICE_MSG_BYTES];
} small_reader;

enum { RD_MORE, RD_DONE, RD_CLOSED, RD_ERROR, RD_BAD };

/* Reads what is there. RD_DONE: *h is a complete small message, or the
 * header of PEERS (its table is still in the socket). RD_BAD: *err says
 * why the bytes are not a cco message. */
static int small_read(int fd, small_reader* rd, cco_wire_header* h, int* err) {
  for (;;) {
    size_t want = CCO_WIRE_HEADER_BYTES;
    if (rd->got >= CCO_WIRE_HEADER_BYTES) {
      *err = cco_wire_decode_header(rd->buf, CCO_WIRE_HEADER_BYTES, UINT32_MAX, h);
      if (*err != CCO_WIRE_OK) return RD_BAD;
      if (h->type == CCO_MSG_PEERS) return RD_DONE;
      if (h->length > CCO_WIRE_TEXT_MAX + 4) {
        *err = CCO_WIRE_ELENGTH;
        return RD_BAD;
      }
      want = CCO_WIRE_HEADER_BYTES + h->length;
      if (rd->got == want) return RD_DONE;
    }
    ssize_t n = recv(fd, rd->buf + rd->got, want - rd->got, MSG_DONTWAIT);
    if (n > 0) {
      rd->got += (size_t)n;
      continue;
    }
    if (n == 0) return RD_CLOSED;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return RD_MORE;
    return errno == ECONNRESET ? RD_CLOSED : RD_ERROR;
  }
}

/* The reason of a REFUSE (after its code) or an ABORT read by small_read. */
static void small_text(const small_reader* rd, const cco_wire_header* h, size_t skip, char* out,
                       size_t size) {
  size_t len = h->length > skip ? h->length - skip : 0;
  cco_wire_decode_text(rd->buf + CCO_WIRE_HEADER_BYTES + skip, len, out, size);
  if (!out[0]) snprintf(out, size, "(no reason given)");
}

enum { OUT_RETRY, OUT_CONNECTING, OUT_HELLO_SENT, OUT_DONE };
enum { ROOT_RETRY, ROOT_CONNECTING, ROOT_WAIT_PEERS, ROOT_LINKING };
enum { JOIN_EMPTY, JOIN_JOINED, JOIN_READY };

typedef struct {
  cco_bootstrap* bs;
  cco_errsink* sink;
  double deadline;
  pending_conn* pend;
  int nPend, capPend, evicted, refused;
  /* the root */
  cco_sockaddr* joinAddr;
  small_reader* joinRd;
  unsigned char* joinState;
  int nJoined, nReady;
  /* a joiner */
  cco_sockaddr root;
  int rootState;
  bool rootReached; /* connected to the root at least once */
  int rootLastErr;  /* errno of the last failed connection to the root */
  double rootRetryAt, rootBackoff;
  small_reader rootRd;
  /* links */
  bool linking; /* the peer table is known and outgoing links started */
  uint8_t* table;
  int outState[CCO_BOOTSTRAP_MAX_LINKS];
  double outRetryAt[CCO_BOOTSTRAP_MAX_LINKS], outBackoff[CCO_BOOTSTRAP_MAX_LINKS];
  small_reader outRd[CCO_BOOTSTRAP_MAX_LINKS];
  int nOutDone, nInDone;
  /* A failure reported only if no better reason comes first (deferAt > 0). */
  double deferAt;
  int deferLink; /* the outgoing link whose refusal armed it */
  ccoResult_t deferRes;
  char deferMsg[320];
} creation;

static int out_peer(const cco_bootstrap* bs, int k) { return mod(bs->rank + (1 << k), bs->nRanks); }
static int in_peer(const cco_bootstrap* bs, int k) { return mod(bs->rank - (1 << k), bs->nRanks); }

static const char* phase(const creation* c) { return c->linking ? "link setup" : "join"; }

/* --- links --- */

static ccoResult_t link_connect(creation* c, int k);

static ccoResult_t link_connect_failed(creation* c, int k, int err) {
  cco_bootstrap* bs = c->bs;
  /* Every rank listens before it joins, and keeps listening until its
   * links are formed: once the table is out, a refused connection means
   * the peer is gone, unless its listener only overflowed for a moment
   * (strangers flooding its port). So the verdict waits CCO_REFUSED_GRACE
   * for a better reason, while the connection is tried again; a link that
   * forms meanwhile withdraws it. */
  if (err == ECONNREFUSED || err == ECONNRESET) {
    if (c->deferAt == 0) {
      c->deferAt = cco_time_now() + CCO_REFUSED_GRACE;
      c->deferLink = k;
      c->deferRes = ccoRemoteError;
      snprintf(c->deferMsg, sizeof(c->deferMsg),
               "rank %d: rank %d refused its link connection during link setup: it no longer "
               "listens (it exited or failed)",
               bs->rank, out_peer(bs, k));
    }
  } else if (!cco_socket_connect_retryable(err)) {
    return fail(bs, c->sink, ccoSystemError, "rank %d: cannot connect to rank %d: %s", bs->rank,
                out_peer(bs, k), strerror(err));
  }
  c->outState[k] = OUT_RETRY;
  c->outRetryAt[k] = cco_time_now() + c->outBackoff[k];
  if (c->outBackoff[k] < 0.1) c->outBackoff[k] *= 2;
  return ccoSuccess;
}

static ccoResult_t link_connect(creation* c, int k) {
  cco_bootstrap* bs = c->bs;
  int peer = out_peer(bs, k);
  cco_sockaddr addr;
  if (cco_wire_decode_addr(c->table + (size_t)peer * CCO_WIRE_ADDR_BYTES, CCO_WIRE_ADDR_BYTES,
                           &addr) != CCO_WIRE_OK)
    return fail(bs, c->sink, ccoRemoteError, "rank %d: bad address of rank %d in the peer table",
                bs->rank, peer);
  cco_socket_close(&bs->outFd[k]);
  c->outRd[k].got = 0;
  int err = cco_socket_connect_start(&addr, &bs->outFd[k]);
  if (err) return link_connect_failed(c, k, err);
  c->outState[k] = OUT_CONNECTING;
  return ccoSuccess;
}

static ccoResult_t start_links(creation* c) {
  c->linking = true;
  for (int k = 0; k < c->bs->nLinks; k++) {
    c->outBackoff[k] = 0.0002;
    CCO_CHECK(link_connect(c, k));
  }
  return ccoSuccess;
}

/* Sends this rank's HELLO on a fresh connection. A connection reset before
 * the HELLO is out was evicted (or its peer is gone): *again says to
 * connect again, which tells the two apart. */
static ccoResult_t send_hello(creation* c, int fd, uint32_t purpose, uint32_t link, int peer,
                              bool* again) {
  cco_bootstrap* bs = c->bs;
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
  cco_io_status st = send_msg(bs, fd, CCO_MSG_HELLO, 0, payload, sizeof(payload), c->deadline);
  *again = st == CCO_IO_CLOSED;
  if (*again) {
    tx_end(bs);
    return ccoSuccess;
  }
  return st == CCO_IO_OK ? ccoSuccess : io_fail(bs, c->sink, st, peer, "hello");
}

static ccoResult_t on_out_writable(creation* c, int k) {
  int err = cco_socket_connect_result(c->bs->outFd[k]);
  if (err) {
    cco_socket_close(&c->bs->outFd[k]);
    return link_connect_failed(c, k, err);
  }
  bool again = false;
  CCO_CHECK(send_hello(c, c->bs->outFd[k], CCO_HELLO_LINK, (uint32_t)k, out_peer(c->bs, k), &again));
  if (again) return link_connect(c, k);
  c->outState[k] = OUT_HELLO_SENT;
  return ccoSuccess;
}

/* A reply to a link HELLO: ACCEPT, REFUSE or ABORT. */
static ccoResult_t on_out_readable(creation* c, int k) {
  cco_bootstrap* bs = c->bs;
  int peer = out_peer(bs, k), err = 0;
  cco_wire_header h;
  char reason[CCO_WIRE_TEXT_MAX + 1];
  switch (small_read(bs->outFd[k], &c->outRd[k], &h, &err)) {
    case RD_MORE: return ccoSuccess;
    case RD_CLOSED:
      if (c->outRd[k].got == 0) {
        /* Closed without a word: the peer evicted this connection as a
         * silent one (its HELLO was late), or it is gone. Connect again;
         * a refused connection then says which. */
        CCO_INFO(BOOT, "rank %d: rank %d closed link %d without a reply; connecting again",
                 bs->rank, peer, k);
        return link_connect(c, k);
      }
      return io_fail(bs, c->sink, CCO_IO_CLOSED, peer, "link setup");
    case RD_ERROR: return io_fail(bs, c->sink, CCO_IO_ERROR, peer, "link setup");
    case RD_BAD:
      return fail(bs, c->sink, ccoRemoteError, "rank %d: bad reply from rank %d to link %d: %s",
                  bs->rank, peer, k, cco_wire_strerror(err));
    default: break;
  }
  if (h.type == CCO_MSG_ACCEPT && h.length == 0) {
    c->outState[k] = OUT_DONE;
    c->nOutDone++;
    if (c->deferAt > 0 && c->deferLink == k) c->deferAt = 0; /* the refusal was momentary */
    return ccoSuccess;
  }
  if (h.type == CCO_MSG_REFUSE && h.length >= 4) {
    small_text(&c->outRd[k], &h, 4, reason, sizeof(reason));
    uint32_t code = cco_wire_get_u32(c->outRd[k].buf + CCO_WIRE_HEADER_BYTES);
    ccoResult_t res = (code > 0 && code < ccoNumResults) ? (ccoResult_t)code : ccoInvalidUsage;
    return fail(bs, c->sink, res, "rank %d: rank %d refused link %d: %s", bs->rank, peer, k,
                reason);
  }
  if (h.type == CCO_MSG_ABORT) {
    small_text(&c->outRd[k], &h, 0, reason, sizeof(reason));
    return fail(bs, c->sink, ccoRemoteError, "rank %d: rank %d failed during link setup: %s",
                bs->rank, peer, reason);
  }
  return fail(bs, c->sink, ccoRemoteError, "rank %d: unexpected %s of %u bytes from rank %d",
              bs->rank, msg_name(h.type), h.length, peer);
}

/* --- the root: rendezvous --- */

static ccoResult_t send_peers(creation* c) {
  cco_bootstrap* bs = c->bs;
  int n = bs->nRanks;
  cco_wire_encode_addr(&bs->listenAddr, c->table);
  for (int r = 1; r < n; r++)
    cco_wire_encode_addr(&c->joinAddr[r], c->table + (size_t)r * CCO_WIRE_ADDR_BYTES);
  for (int r = 1; r < n; r++) {
    cco_io_status st = send_msg(bs, bs->joinFds[r], CCO_MSG_PEERS, 0, c->table,
                                (uint32_t)((size_t)n * CCO_WIRE_ADDR_BYTES), c->deadline);
    if (st != CCO_IO_OK) return io_fail_peer(bs, c->sink, st, r, "join", bs->joinFds[r], -1, -1);
  }
  return start_links(c);
}

/* A joined rank's connection: READY, or an ABORT, or a close. */
static ccoResult_t on_join_readable(creation* c, int r) {
  cco_bootstrap* bs = c->bs;
  int err = 0;
  cco_wire_header h;
  char reason[CCO_WIRE_TEXT_MAX + 1];
  switch (small_read(bs->joinFds[r], &c->joinRd[r], &h, &err)) {
    case RD_MORE: return ccoSuccess;
    case RD_CLOSED:
      return fail(bs, c->sink, ccoRemoteError,
                  "rank 0: rank %d closed its connection during %s (it exited or failed)", r,
                  phase(c));
    case RD_ERROR: return io_fail(bs, c->sink, CCO_IO_ERROR, r, phase(c));
    case RD_BAD:
      return fail(bs, c->sink, ccoRemoteError, "rank 0: bad message from rank %d during %s: %s", r,
                  phase(c), cco_wire_strerror(err));
    default: break;
  }
  c->joinRd[r].got = 0;
  if (h.type == CCO_MSG_ABORT) {
    small_text(&c->joinRd[r], &h, 0, reason, sizeof(reason));
    return fail(bs, c->sink, ccoRemoteError, "rank 0: rank %d failed during %s: %s", r, phase(c),
                reason);
  }
  if (h.type == CCO_MSG_READY && h.length == 0 && c->linking) {
    c->joinState[r] = JOIN_READY;
    c->nReady++;
    return ccoSuccess;
  }
  return fail(bs, c->sink, ccoRemoteError, "rank 0: unexpected %s of %u bytes from rank %d",
              msg_name(h.type), h.length, r);
}

/* --- a joiner: its connection to the root --- */

static ccoResult_t root_connect(creation* c);

static ccoResult_t root_connect_failed(creation* c, int err) {
  cco_bootstrap* bs = c->bs;
  char buf[96];
  if (c->rootReached && (err == ECONNREFUSED || err == ECONNRESET))
    return fail(bs, c->sink, ccoRemoteError,
                "rank %d: rank 0 closed its connection during join and no longer accepts "
                "connections (it exited or failed)",
                bs->rank);
  if (!cco_socket_connect_retryable(err))
    return fail(bs, c->sink, ccoSystemError, "rank %d: cannot connect to the root at %s: %s",
                bs->rank, cco_sockaddr_str(&c->root, buf, sizeof(buf)), strerror(err));
  /* The root may not be up yet: back off (bounded) and try again. */
  c->rootLastErr = err;
  c->rootState = ROOT_RETRY;
  c->rootRetryAt = cco_time_now() + c->rootBackoff;
  if (c->rootBackoff < 0.1) c->rootBackoff *= 2;
  return ccoSuccess;
}

static ccoResult_t root_connect(creation* c) {
  cco_socket_close(&c->bs->rootFd);
  c->rootRd.got = 0;
  int err = cco_socket_connect_start(&c->root, &c->bs->rootFd);
  if (err) return root_connect_failed(c, err);
  c->rootState = ROOT_CONNECTING;
  return ccoSuccess;
}

static ccoResult_t on_root_writable(creation* c) {
  cco_bootstrap* bs = c->bs;
  int err = cco_socket_connect_result(bs->rootFd);
  if (err) {
    cco_socket_close(&bs->rootFd);
    return root_connect_failed(c, err);
  }
  c->rootReached = true;
  bool again = false;
  CCO_CHECK(send_hello(c, bs->rootFd, CCO_HELLO_JOIN, 0, 0, &again));
  if (again) return root_connect(c);
  c->rootState = ROOT_WAIT_PEERS;
  return ccoSuccess;
}

static ccoResult_t on_root_readable(creation* c) {
  cco_bootstrap* bs = c->bs;
  int err = 0;
  cco_wire_header h;
  char reason[CCO_WIRE_TEXT_MAX + 1];
  switch (small_read(bs->rootFd, &c->rootRd, &h, &err)) {
    case RD_MORE: return ccoSuccess;
    case RD_CLOSED:
      if (c->rootState == ROOT_WAIT_PEERS && c->rootRd.got == 0) {
        /* No reply at all: the root evicted this connection as a silent
         * one (the HELLO was late), or it is gone. Connect again; a
         * refused connection then says which. */
        CCO_INFO(BOOT, "rank %d: rank 0 closed the join connection without a reply; joining again",
                 bs->rank);
        return root_connect(c);
      }
      return fail(bs, c->sink, ccoRemoteError,
                  "rank %d: rank 0 closed its connection during %s (it exited or failed)",
                  bs->rank, phase(c));
    case RD_ERROR: return io_fail(bs, c->sink, CCO_IO_ERROR, 0, phase(c));
    case RD_BAD:
      return fail(bs, c->sink, ccoRemoteError, "rank %d: bad message from rank 0 during %s: %s",
                  bs->rank, phase(c), cco_wire_strerror(err));
    default: break;
  }
  if (h.type == CCO_MSG_ABORT) {
    small_text(&c->rootRd, &h, 0, reason, sizeof(reason));
    return fail(bs, c->sink, ccoRemoteError, "rank %d: rank 0 failed during %s: %s", bs->rank,
                phase(c), reason);
  }
  if (c->rootState == ROOT_WAIT_PEERS && h.type == CCO_MSG_REFUSE && h.length >= 4) {
    small_text(&c->rootRd, &h, 4, reason, sizeof(reason));
    uint32_t code = cco_wire_get_u32(c->rootRd.buf + CCO_WIRE_HEADER_BYTES);
    ccoResult_t res = (code > 0 && code < ccoNumResults) ? (ccoResult_t)code : ccoInvalidUsage;
    return fail(bs, c->sink, res, "rank %d: rank 0 refused this rank: %s", bs->rank, reason);
  }
  size_t tableBytes = (size_t)bs->nRanks * CCO_WIRE_ADDR_BYTES;
  if (c->rootState == ROOT_WAIT_PEERS && h.type == CCO_MSG_PEERS && h.length == tableBytes) {
    cco_io_status st = cco_socket_recv_all(bs->rootFd, c->table, tableBytes, c->deadline, bs->wakeFd);
    if (st != CCO_IO_OK) return io_fail(bs, c->sink, st, 0, "join");
    c->rootRd.got = 0;
    c->rootState = ROOT_LINKING;
    return start_links(c);
  }
  return fail(bs, c->sink, ccoRemoteError, "rank %d: unexpected %s of %u bytes from rank 0",
              bs->rank, msg_name(h.type), h.length);
}

/* --- the listening socket --- */

static void drop_pending(creation* c, int i, bool reset) {
  if (reset) cco_socket_close_reset(&c->pend[i].fd);
  else cco_socket_close(&c->pend[i].fd);
  c->pend[i] = c->pend[--c->nPend];
}

static void refuse_pending(creation* c, int i, ccoResult_t code, const char* reason) {
  /* A flood of strangers must not flood the log too. */
  CCO_LOG(c->refused++ < 10 ? CCO_LOG_WARN : CCO_LOG_INFO, CCO_SUBSYS_BOOT,
          "rank %d: refused a connection: %s", c->bs->rank, reason);
  send_refuse(c->pend[i].fd, code, reason);
  drop_pending(c, i, false);
}

/* A HELLO with this job's secret that cannot be accepted comes from a
 * misconfigured member of this job: the job cannot form as launched. The
 * sender is refused and every rank told. */
static ccoResult_t doom(creation* c, int i, ccoResult_t code, const char* reason) {
  cco_bootstrap* bs = c->bs;
  send_refuse(c->pend[i].fd, code, reason);
  drop_pending(c, i, false);
  return fail(bs, c->sink, code, "rank %d: refused a rank of this job, so the job cannot form: %s",
              bs->rank, reason);
}

/* A rank that failed before it could join sent its reason behind the HELLO. */
static ccoResult_t on_failed_hello(creation* c, int i, const cco_wire_hello* hello) {
  cco_bootstrap* bs = c->bs;
  uint8_t raw[CCO_WIRE_HEADER_BYTES];
  uint8_t text[CCO_WIRE_TEXT_MAX];
  char reason[CCO_WIRE_TEXT_MAX + 1] = "(no reason given)";
  cco_wire_header h;
  double until = cco_time_now() + 1.0;
  if (cco_socket_recv_all(c->pend[i].fd, raw, sizeof(raw), until, -1) == CCO_IO_OK &&
      cco_wire_decode_header(raw, sizeof(raw), CCO_WIRE_TEXT_MAX, &h) == CCO_WIRE_OK &&
      h.type == CCO_MSG_ABORT &&
      cco_socket_recv_all(c->pend[i].fd, text, h.length, until, -1) == CCO_IO_OK && h.length)
    cco_wire_decode_text(text, h.length, reason, sizeof(reason));
  drop_pending(c, i, false);
  return fail(bs, c->sink, ccoRemoteError, "rank %d: rank %u failed before it could join: %s",
              bs->rank, hello->rank, reason);
}

/* Judges the complete HELLO of pending connection i. */
static ccoResult_t judge_hello(creation* c, int i) {
  cco_bootstrap* bs = c->bs;
  cco_wire_header h;
  cco_wire_hello hello;
  char reason[200];
  int err = cco_wire_decode_header(c->pend[i].buf, CCO_WIRE_HEADER_BYTES, CCO_WIRE_HELLO_BYTES, &h);
  if (err == CCO_WIRE_OK && (h.type != CCO_MSG_HELLO || h.length != CCO_WIRE_HELLO_BYTES))
    err = CCO_WIRE_ELENGTH;
  if (err == CCO_WIRE_OK)
    err = cco_wire_decode_hello(c->pend[i].buf + CCO_WIRE_HEADER_BYTES, CCO_WIRE_HELLO_BYTES, &hello);
  if (err != CCO_WIRE_OK) {
    snprintf(reason, sizeof(reason), "not a cco hello: %s", cco_wire_strerror(err));
    refuse_pending(c, i, ccoInvalidUsage, reason);
    return ccoSuccess;
  }
  if (!secret_equal(hello.secret, bs->secret)) {
    refuse_pending(c, i, ccoInvalidUsage, "wrong secret: the joiner holds a different unique id");
    return ccoSuccess;
  }
  /* From here on the sender holds this job's unique id. */
  if (hello.purpose == CCO_HELLO_FAILED) return on_failed_hello(c, i, &hello);
  if ((int)hello.nRanks != bs->nRanks) {
    snprintf(reason, sizeof(reason), "nRanks mismatch: rank %u says %u, rank %d has %d",
             hello.rank, hello.nRanks, bs->rank, bs->nRanks);
    return doom(c, i, ccoInvalidUsage, reason);
  }
  if (hello.purpose == CCO_HELLO_JOIN) {
    if (bs->rank != 0) {
      snprintf(reason, sizeof(reason), "a join hello of rank %u reached rank %d, not the root",
               hello.rank, bs->rank);
      return doom(c, i, ccoInvalidUsage, reason);
    }
    if (hello.rank == 0 || hello.rank >= (uint32_t)bs->nRanks) {
      snprintf(reason, sizeof(reason), "rank %u out of range 1..%d", hello.rank, bs->nRanks - 1);
      return doom(c, i, ccoInvalidUsage, reason);
    }
    if (c->joinState[hello.rank] != JOIN_EMPTY) {
      snprintf(reason, sizeof(reason), "rank %u already joined (two processes claim it)",
               hello.rank);
      return doom(c, i, ccoInvalidUsage, reason);
    }
    int r = (int)hello.rank;
    bs->joinFds[r] = c->pend[i].fd;
    c->pend[i].fd = -1;
    drop_pending(c, i, false);
    c->joinAddr[r] = hello.addr;
    c->joinState[r] = JOIN_JOINED;
    c->joinRd[r].got = 0;
    if (++c->nJoined == bs->nRanks - 1) return send_peers(c);
    return ccoSuccess;
  }
  /* A link. */
  if (hello.link >= (uint32_t)bs->nLinks || (int)hello.rank != in_peer(bs, (int)hello.link)) {
    snprintf(reason, sizeof(reason), "unexpected link %u from rank %u", hello.link, hello.rank);
    return doom(c, i, ccoInvalidUsage, reason);
  }
  int k = (int)hello.link;
  if (bs->inFd[k] >= 0) {
    snprintf(reason, sizeof(reason), "duplicate link %u from rank %u", hello.link, hello.rank);
    return doom(c, i, ccoInvalidUsage, reason);
  }
  bs->inFd[k] = c->pend[i].fd;
  c->pend[i].fd = -1;
  drop_pending(c, i, false);
  c->nInDone++;
  cco_io_status st = send_msg(bs, bs->inFd[k], CCO_MSG_ACCEPT, 0, NULL, 0, c->deadline);
  return st == CCO_IO_OK ? ccoSuccess : io_fail(bs, c->sink, st, in_peer(bs, k), "link setup");
}

/* Reads what pending connection i has sent; judges it once complete. */
static ccoResult_t read_pending(creation* c, int i) {
  pending_conn* p = &c->pend[i];
  ssize_t r = recv(p->fd, p->buf + p->got, sizeof(p->buf) - p->got, MSG_DONTWAIT);
  if (r > 0) {
    p->got += (size_t)r;
  } else if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
    CCO_INFO(BOOT, "rank %d: a connection closed before its hello", c->bs->rank);
    drop_pending(c, i, true);
    return ccoSuccess;
  }
  /* A bad header is refused as soon as its 16 bytes are in. */
  cco_wire_header h;
  if (p->got >= CCO_WIRE_HEADER_BYTES && p->got < sizeof(p->buf) &&
      cco_wire_decode_header(p->buf, CCO_WIRE_HEADER_BYTES, CCO_WIRE_HELLO_BYTES, &h) != CCO_WIRE_OK)
    p->got = sizeof(p->buf); /* judge_hello reports the header error */
  return p->got == sizeof(p->buf) ? judge_hello(c, i) : ccoSuccess;
}

/* Makes room for one more pending connection: the oldest goes, unless its
 * HELLO has come in meanwhile. */
static ccoResult_t make_room(creation* c) {
  int oldest = 0;
  for (int i = 1; i < c->nPend; i++)
    if (c->pend[i].since < c->pend[oldest].since) oldest = i;
  int before = c->nPend;
  CCO_CHECK(read_pending(c, oldest));
  if (c->nPend < before) return ccoSuccess; /* judged, or it closed */
  if (c->evicted++ == 0)
    CCO_WARN(BOOT, "rank %d: more than %d connections are waiting to say hello; evicting the "
             "oldest (strangers on the bootstrap port?)",
             c->bs->rank, c->capPend);
  drop_pending(c, oldest, true);
  return ccoSuccess;
}

/* Accepts what is waiting (a batch at most). *starved: out of fds with
 * nothing left to evict, so the listener should rest for a round. */
static ccoResult_t accept_new(creation* c, bool* starved) {
  cco_bootstrap* bs = c->bs;
  *starved = false;
  int batch = c->capPend / 2 > 0 ? c->capPend / 2 : 1;
  for (int n = 0; n < batch; n++) {
    int fd = accept4(bs->listenFd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE) {
        if (c->nPend == 0) {
          *starved = true;
          return ccoSuccess;
        }
        CCO_CHECK(make_room(c)); /* out of fds: room for the next */
        continue;
      }
      return ccoSuccess; /* EAGAIN, or an error for the next round to retry */
    }
    if (c->nPend == c->capPend) {
      ccoResult_t res = make_room(c);
      if (res != ccoSuccess) {
        close(fd);
        return res;
      }
    }
    double now = cco_time_now();
    double helloDeadline = now + CCO_HELLO_TIMEOUT;
    pending_conn* p = &c->pend[c->nPend++];
    p->fd = fd;
    p->got = 0;
    p->since = now;
    p->deadline = helloDeadline < c->deadline ? helloDeadline : c->deadline;
    /* A real rank sends its HELLO right after it connects: often it is here. */
    CCO_CHECK(read_pending(c, c->nPend - 1));
  }
  return ccoSuccess;
}

/* --- the loop --- */

static bool creation_done(const creation* c) {
  const cco_bootstrap* bs = c->bs;
  if (!c->linking || c->nOutDone < bs->nLinks || c->nInDone < bs->nLinks) return false;
  return bs->rank != 0 || c->nReady == bs->nRanks - 1;
}

static void list_missing(const creation* c, char* buf, size_t size) {
  const cco_bootstrap* bs = c->bs;
  size_t o = 0;
  buf[0] = '\0';
#define ADD(...)                                                           \
  do {                                                                     \
    if (o + 1 < size) o += (size_t)snprintf(buf + o, size - o, __VA_ARGS__); \
  } while (0)
  if (bs->rank == 0 && !c->linking) {
    ADD("ranks that have not joined:");
    for (int r = 1; r < bs->nRanks; r++)
      if (c->joinState[r] == JOIN_EMPTY) ADD(" %d", r);
  } else if (bs->rank != 0 && !c->linking) {
    ADD(c->rootReached ? "rank 0 is still waiting for other ranks to join"
                       : "rank 0 could not be reached");
  } else {
    ADD("links missing:");
    for (int k = 0; k < bs->nLinks; k++)
      if (c->outState[k] != OUT_DONE) ADD(" to rank %d", out_peer(bs, k));
    for (int k = 0; k < bs->nLinks; k++)
      if (bs->inFd[k] < 0) ADD(" from rank %d", in_peer(bs, k));
    if (bs->rank == 0 && c->nReady < bs->nRanks - 1) {
      ADD("; ranks still forming links:");
      for (int r = 1; r < bs->nRanks; r++)
        if (c->joinState[r] != JOIN_READY) ADD(" %d", r);
    }
  }
#undef ADD
}

enum { EV_WAKE, EV_LISTEN, EV_PEND, EV_JOIN, EV_ROOT, EV_OUT };

static ccoResult_t creation_loop(creation* c) {
  cco_bootstrap* bs = c->bs;
  int n = bs->nRanks;
  size_t cap = 2 + (size_t)c->capPend + (size_t)n + 1 + CCO_BOOTSTRAP_MAX_LINKS;
  struct pollfd* p = malloc(cap * sizeof(*p));
  int* tag = malloc(cap * 2 * sizeof(int));
  if (!p || !tag) {
    free(p);
    free(tag);
    return fail(bs, c->sink, ccoOutOfMemory, "rank %d: no memory to poll", bs->rank);
  }
  ccoResult_t res = ccoSuccess;
  bool acceptPaused = false;
  double pausedUntil = 0;
  while (res == ccoSuccess && !creation_done(c)) {
    double now = cco_time_now(), next = c->deadline;
    int np = 0;
#define WATCH(fd_, ev_, kind_, idx_)             \
  do {                                           \
    p[np] = (struct pollfd){(fd_), (ev_), 0};    \
    tag[2 * np] = (kind_);                       \
    tag[2 * np + 1] = (idx_);                    \
    np++;                                        \
  } while (0)
    if (bs->wakeFd >= 0) WATCH(bs->wakeFd, POLLIN, EV_WAKE, 0);
    if (acceptPaused && now >= pausedUntil) acceptPaused = false;
    if (!acceptPaused) WATCH(bs->listenFd, POLLIN, EV_LISTEN, 0);
    else if (pausedUntil < next) next = pausedUntil;
    for (int i = 0; i < c->nPend; i++) {
      WATCH(c->pend[i].fd, POLLIN, EV_PEND, i);
      if (c->pend[i].deadline < next) next = c->pend[i].deadline;
    }
    if (bs->rank == 0) {
      for (int r = 1; r < n; r++)
        if (c->joinState[r] == JOIN_JOINED) WATCH(bs->joinFds[r], POLLIN, EV_JOIN, r);
    } else if (c->rootState == ROOT_RETRY) {
      if (c->rootRetryAt < next) next = c->rootRetryAt;
    } else {
      WATCH(bs->rootFd, c->rootState == ROOT_CONNECTING ? POLLOUT : POLLIN, EV_ROOT, 0);
    }
    if (c->deferAt > 0 && c->deferAt < next) next = c->deferAt;
    if (c->linking)
      for (int k = 0; k < bs->nLinks; k++) {
        if (c->outState[k] == OUT_RETRY) {
          if (c->outRetryAt[k] < next) next = c->outRetryAt[k];
        } else if (c->outState[k] != OUT_DONE) {
          WATCH(bs->outFd[k], c->outState[k] == OUT_CONNECTING ? POLLOUT : POLLIN, EV_OUT, k);
        }
      }
#undef WATCH
    /* ppoll: retries of a connect are due in fractions of a millisecond. */
    struct timespec ts, *tsp = NULL;
    if (!isinf(next)) {
      double left = fmin(fmax(next - now, 0.0), 3600.0);
      ts.tv_sec = (time_t)left;
      ts.tv_nsec = (long)((left - (double)ts.tv_sec) * 1e9);
      tsp = &ts;
    }
    int got = ppoll(p, (nfds_t)np, tsp, NULL);
    if (got < 0 && errno != EINTR) {
      res = io_fail(bs, c->sink, CCO_IO_ERROR, -1, phase(c));
      break;
    }
    /* Events, in an order where handling one cannot move another: pending
     * connections from the last (drop_pending moves the last into the
     * hole), then the rest, then new connections. */
    for (int e = np - 1; got > 0 && res == ccoSuccess && e >= 0; e--) {
      if (!p[e].revents) continue;
      int idx = tag[2 * e + 1];
      switch (tag[2 * e]) {
        case EV_WAKE: res = io_fail(bs, c->sink, CCO_IO_WOKEN, -1, phase(c)); break;
        case EV_PEND: res = read_pending(c, idx); break;
        case EV_JOIN:
          if (c->joinState[idx] == JOIN_JOINED) res = on_join_readable(c, idx);
          break;
        case EV_ROOT:
          if (c->rootState == ROOT_CONNECTING) res = on_root_writable(c);
          else if (c->rootState != ROOT_RETRY) res = on_root_readable(c);
          break;
        case EV_OUT:
          if (c->outState[idx] == OUT_CONNECTING) res = on_out_writable(c, idx);
          else if (c->outState[idx] == OUT_HELLO_SENT) res = on_out_readable(c, idx);
          break;
        default: break;
      }
    }
    if (res != ccoSuccess) break;
    /* The listener was the first or second entry; its index is stable. */
    for (int e = 0; e < np && e < 2; e++)
      if (tag[2 * e] == EV_LISTEN && p[e].revents) {
        res = accept_new(c, &acceptPaused);
        /* Out of fds with nothing to evict: give the listener a rest. */
        if (acceptPaused) pausedUntil = cco_time_now() + 0.01;
      }
    if (res != ccoSuccess) break;
    /* Timers. */
    now = cco_time_now();
    for (int i = c->nPend - 1; i >= 0; i--)
      if (c->pend[i].deadline <= now) refuse_pending(c, i, ccoTimeout, "no hello in time");
    if (bs->rank != 0 && c->rootState == ROOT_RETRY && c->rootRetryAt <= now) res = root_connect(c);
    for (int k = 0; res == ccoSuccess && c->linking && k < bs->nLinks; k++)
      if (c->outState[k] == OUT_RETRY && c->outRetryAt[k] <= now) res = link_connect(c, k);
    if (res == ccoSuccess && c->deferAt > 0 && now >= c->deferAt)
      res = fail(bs, c->sink, c->deferRes, "%s", c->deferMsg);
    if (res == ccoSuccess && !creation_done(c) && now >= c->deadline) {
      char missing[256];
      char buf[96];
      list_missing(c, missing, sizeof(missing));
      /* Refused all along: nothing ever listened there. */
      if (bs->rank != 0 && !c->rootReached && c->rootLastErr == ECONNREFUSED)
        res = fail(bs, c->sink, ccoTimeout,
                   "rank %d: nothing listened at the root's address %s for %g s (connection "
                   "refused): rank 0 did not start, or the unique id is left over from an earlier "
                   "job",
                   bs->rank, cco_sockaddr_str(&c->root, buf, sizeof(buf)), bs->timeout);
      else if (bs->rank != 0 && !c->rootReached)
        res = fail(bs, c->sink, ccoTimeout, "rank %d: could not reach the root at %s within %g s",
                   bs->rank, cco_sockaddr_str(&c->root, buf, sizeof(buf)), bs->timeout);
      else
        res = fail(bs, c->sink, ccoTimeout,
                   "rank %d: timed out after %g s during %s (%s; CCO_BOOTSTRAP_TIMEOUT)", bs->rank,
                   bs->timeout, phase(c), missing);
    }
  }
  free(p);
  free(tag);
  return res;
}

/* How long a root whose job failed before every rank joined keeps
 * answering the ranks still on their way. Without it, a rank that connects
 * after the root gave up finds the port closed, takes that for a root not
 * listening yet, and retries until its timeout. */
#define CCO_ROOT_LINGER_S 0.5

/* Answers each late JOIN hello of this job with the failure (an ABORT
 * carrying the reason), so that rank fails now, naming the cause; ends when
 * every rank that never joined has been told, or after CCO_ROOT_LINGER_S.
 * Connections already accepted and waiting for their hello come first
 * (their hello may be half read). Anything else is closed unanswered. */
static void tell_latecomers(creation* c) {
  cco_bootstrap* bs = c->bs;
  int missing = bs->nRanks - 1 - c->nJoined;
  if (bs->rank != 0 || bs->failResult == ccoSuccess || missing <= 0 || bs->listenFd < 0) return;
  size_t n = strlen(bs->failReason);
  if (n > CCO_WIRE_TEXT_MAX) n = CCO_WIRE_TEXT_MAX;
  double end = cco_time_now() + CCO_ROOT_LINGER_S;
  while (missing > 0 && cco_time_now() < end) {
    pending_conn p;
    if (c->nPend > 0) {
      p = c->pend[c->nPend - 1];
      c->nPend--;
    } else {
      struct pollfd pfd = {bs->listenFd, POLLIN, 0};
      if (poll(&pfd, 1, (int)((end - cco_time_now()) * 1e3) + 1) <= 0) continue;
      p.fd = accept4(bs->listenFd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
      p.got = 0;
      if (p.fd < 0) continue;
    }
    double until = cco_time_now() + 0.1 < end ? cco_time_now() + 0.1 : end;
    cco_wire_header h;
    cco_wire_hello hello;
    if (cco_socket_recv_all(p.fd, p.buf + p.got, sizeof(p.buf) - p.got, until, -1) == CCO_IO_OK &&
        cco_wire_decode_header(p.buf, CCO_WIRE_HEADER_BYTES, CCO_WIRE_HELLO_BYTES, &h) == CCO_WIRE_OK &&
        h.type == CCO_MSG_HELLO &&
        cco_wire_decode_hello(p.buf + CCO_WIRE_HEADER_BYTES, CCO_WIRE_HELLO_BYTES, &hello) == CCO_WIRE_OK &&
        secret_equal(hello.secret, bs->secret) && hello.purpose == CCO_HELLO_JOIN) {
      send_msg_nowait(p.fd, CCO_MSG_ABORT, bs->failReason, (uint32_t)n);
      missing--;
    }
    cco_socket_close(&p.fd);
  }
}

/* Every rank but the root: joins, forms its links, tells the root. The
 * root: gathers the joiners, sends the table, forms its links, and waits
 * until every joiner has formed its own, watching them all the while. */
static ccoResult_t form_job(cco_bootstrap* bs, cco_errsink* sink, const cco_id_info* id,
                            double deadline) {
  int n = bs->nRanks;
  creation* c = calloc(1, sizeof(*c));
  if (!c) return cco_error(sink, ccoOutOfMemory, CCO_SUBSYS_BOOT, "rank %d: no memory", bs->rank);
  ccoResult_t res = ccoSuccess;
  c->bs = bs;
  c->sink = sink;
  c->deadline = deadline;
  c->root = id->root;
  c->rootBackoff = 0.0002;
  struct rlimit rl;
  c->capPend = CCO_MIN_PENDING;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
    c->capPend = rl.rlim_cur / 4 > CCO_MAX_PENDING ? CCO_MAX_PENDING
                 : rl.rlim_cur / 4 < CCO_MIN_PENDING ? CCO_MIN_PENDING
                                                      : (int)(rl.rlim_cur / 4);
  else if (rl.rlim_cur == RLIM_INFINITY)
    c->capPend = CCO_MAX_PENDING;
  c->pend = malloc((size_t)c->capPend * sizeof(pending_conn));
  c->table = calloc((size_t)n, CCO_WIRE_ADDR_BYTES);
  if (!c->pend || !c->table) goto oom;
  if (bs->rank == 0) {
    bs->joinFds = malloc((size_t)n * sizeof(int));
    c->joinAddr = calloc((size_t)n, sizeof(cco_sockaddr));
    c->joinRd = calloc((size_t)n, sizeof(small_reader));
    c->joinState = calloc((size_t)n, 1);
    if (!bs->joinFds || !c->joinAddr || !c->joinRd || !c->joinState) goto oom;
    for (int r = 0; r < n; r++) bs->joinFds[r] = -1;
    c->joinState[0] = JOIN_READY; /* the root's own slot is never free */
  } else {
    res = root_connect(c);
  }
  if (res == ccoSuccess) res = creation_loop(c);
  if (res != ccoSuccess) tell_latecomers(c);
  if (res == ccoSuccess) {
    if (bs->rank != 0) {
      /* Links formed: tell the root, and be the side that closes first. */
      cco_io_status st = send_msg(bs, bs->rootFd, CCO_MSG_READY, 0, NULL, 0, deadline);
      if (st != CCO_IO_OK) res = io_fail(bs, sink, st, 0, "link setup");
      else cco_socket_close(&bs->rootFd);
    } else {
      /* Every joiner has read the table and sent READY: nothing of ours is
       * left to deliver, and a reset leaves no TIME_WAIT on the root port. */
      for (int r = 1; r < n; r++) cco_socket_close_reset(&bs->joinFds[r]);
      free(bs->joinFds);
      bs->joinFds = NULL;
    }
  }
  if (c->evicted)
    CCO_INFO(BOOT, "rank %d: evicted %d silent connection(s) during creation", bs->rank,
             c->evicted);
  goto out;
oom:
  res = cco_error(sink, ccoOutOfMemory, CCO_SUBSYS_BOOT, "rank %d: no memory for %d ranks",
                  bs->rank, n);
out:
  if (c->pend)
    while (c->nPend > 0) drop_pending(c, c->nPend - 1, true);
  free(c->pend);
  free(c->table);
  free(c->joinAddr);
  free(c->joinRd);
  free(c->joinState);
  free(c);
  return res;
}

/* A rank that cannot take part (no address, cannot listen) tells the root,
 * which fails the whole job with this reason instead of waiting for it. */
static void report_failure(cco_bootstrap* bs, const cco_id_info* id, const char* reason) {
  double limit = bs->timeout > 0 && bs->timeout < CCO_REPORT_TIMEOUT ? bs->timeout : CCO_REPORT_TIMEOUT;
  double deadline = cco_time_now() + limit;
  int fd = -1;
  if (cco_socket_connect(&id->root, deadline, bs->wakeFd, &fd) != CCO_IO_OK) return;
  cco_wire_hello h;
  memset(&h, 0, sizeof(h));
  memcpy(h.secret, bs->secret, sizeof(h.secret));
  h.nRanks = (uint32_t)bs->nRanks;
  h.rank = (uint32_t)bs->rank;
  h.purpose = CCO_HELLO_FAILED;
  uint8_t msg[CCO_HELLO_MSG_BYTES + CCO_WIRE_HEADER_BYTES + CCO_WIRE_TEXT_MAX];
  size_t n = strlen(reason);
  if (n > CCO_WIRE_TEXT_MAX) n = CCO_WIRE_TEXT_MAX;
  cco_wire_encode_header(msg, CCO_MSG_HELLO, CCO_WIRE_HELLO_BYTES, 0);
  cco_wire_encode_hello(&h, msg + CCO_WIRE_HEADER_BYTES);
  cco_wire_encode_header(msg + CCO_HELLO_MSG_BYTES, CCO_MSG_ABORT, (uint32_t)n, 0);
  memcpy(msg + CCO_HELLO_MSG_BYTES + CCO_WIRE_HEADER_BYTES, reason, n);
  (void)cco_socket_send_all(fd, msg, CCO_HELLO_MSG_BYTES + CCO_WIRE_HEADER_BYTES + n, deadline,
                            bs->wakeFd);
  cco_socket_close(&fd);
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
  ccoResult_t res = cco_socket_route_source(&id->root, addr);
  if (res != ccoSuccess)
    return cco_error(sink, res, CCO_SUBSYS_BOOT, "rank %d: %s", bs->rank, cco_thread_last_error());
  return ccoSuccess;
}

ccoResult_t cco_bootstrap_init(cco_bootstrap* bs, cco_errsink* sink, const cco_id_info* id, int nRanks,
                               int rank, double timeout, int wakeFd) {
  if (!bs || !id)
    return cco_error(sink, ccoInvalidArgument, CCO_SUBSYS_BOOT, "bootstrap or id is NULL");
  if (nRanks < 1 || rank < 0 || rank >= nRanks)
    return cco_error(sink, ccoInvalidArgument, CCO_SUBSYS_BOOT, "rank %d of %d is out of range",
                     rank, nRanks);
  if (!(timeout >= 0))
    return cco_error(sink, ccoInvalidArgument, CCO_SUBSYS_BOOT, "timeout %g is negative", timeout);
  memset(bs, 0, sizeof(*bs));
  bs->rank = rank;
  bs->nRanks = nRanks;
  bs->nLinks = link_count(nRanks);
  bs->listenFd = -1;
  bs->rootFd = -1;
  bs->joinFds = NULL;
  bs->tx.fd = -1;
  bs->timeout = timeout;
  bs->wakeFd = wakeFd;
  bs->failResult = ccoSuccess;
  memcpy(bs->secret, id->secret, sizeof(bs->secret));
  for (int k = 0; k < CCO_BOOTSTRAP_MAX_LINKS; k++) bs->outFd[k] = bs->inFd[k] = -1;
  if (bs->nLinks > CCO_BOOTSTRAP_MAX_LINKS)
    return cco_error(sink, ccoInvalidArgument, CCO_SUBSYS_BOOT, "nRanks %d is too large", nRanks);

  double deadline = cco_deadline_after(timeout);
  ccoResult_t res = ccoSuccess;
  cco_sockaddr want;
  res = choose_listen_address(bs, sink, id, cco_env_str(CCO_ENV_ID_CCO_SOCKET_IFNAME), &want);
  /* SO_REUSEADDR everywhere: the root binds the port of the id, which an
   * earlier job's connection may still hold in TIME_WAIT. */
  if (res == ccoSuccess) {
    res = cco_socket_listen(&want, true, &bs->listenFd, &bs->listenAddr);
    if (res != ccoSuccess)
      res = cco_error(sink, res, CCO_SUBSYS_BOOT, "rank %d: %s%s", rank, cco_thread_last_error(),
                      rank == 0 ? " (rank 0 must run on the host that created the unique id, and "
                                  "the id must not be in use by another job)"
                                : "");
  }
  if (res != ccoSuccess) {
    /* Without a listening socket this rank cannot take part: say so to the
     * root, so the other ranks fail now instead of at their timeout. */
    if (rank != 0 && nRanks > 1) {
      char reason[CCO_WIRE_TEXT_MAX + 1];
      snprintf(reason, sizeof(reason), "%s", cco_thread_last_error());
      report_failure(bs, id, reason);
    }
    goto err;
  }
  {
    char buf[96];
    CCO_INFO(BOOT, "rank %d/%d: listening on %s", rank, nRanks,
             cco_sockaddr_str(&bs->listenAddr, buf, sizeof(buf)));
  }
  if (nRanks > 1) CCO_CHECK_GOTO(form_job(bs, sink, id, deadline), res, err);
  /* No one connects to us from now on. */
  cco_socket_close(&bs->listenFd);
  return ccoSuccess;
err:
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

/* Names the ring neighbour behind the failed fd, or the reason it or the
 * predecessor left in an ABORT. */
static ccoResult_t ring_fail(cco_bootstrap* bs, cco_errsink* sink, cco_io_status st, int badFd) {
  int n = bs->nRanks;
  int peer = badFd == bs->outFd[0] ? mod(bs->rank + 1, n) : mod(bs->rank - 1, n);
  return io_fail_peer(bs, sink, st, peer, "allgather", badFd, bs->inFd[0], mod(bs->rank - 1, n));
}

/* Blocks up to this size go out with their header in one send, so a ring
 * step costs one trip instead of two (header, then body). Small enough that
 * every rank's whole message fits the socket buffers: each rank may finish
 * sending before its successor reads the body. */
#define CCO_BOOTSTRAP_INLINE_BYTES 4096

ccoResult_t cco_bootstrap_allgather(cco_bootstrap* bs, cco_errsink* sink, void* buf,
                                    size_t bytesPerRank) {
  if (!bs || (!buf && bytesPerRank))
    return cco_error(sink, ccoInvalidArgument, CCO_SUBSYS_BOOT, "allgather: NULL argument");
  CCO_CHECK(check_usable(bs, sink, "allgather"));
  if (bytesPerRank > UINT32_MAX)
    return cco_error(sink, ccoInvalidArgument, CCO_SUBSYS_BOOT,
                     "allgather of %zu bytes per rank is over the 4 GiB limit", bytesPerRank);
  uint32_t seq = ++bs->seq;
  int n = bs->nRanks, prev = mod(bs->rank - 1, n);
  char* data = buf;
  bool inline_ = bytesPerRank <= CCO_BOOTSTRAP_INLINE_BYTES;
  uint8_t msg[CCO_WIRE_HEADER_BYTES + CCO_BOOTSTRAP_INLINE_BYTES];
  ccoResult_t res = ccoSuccess;
  for (int step = 0; step < n - 1 && res == ccoSuccess; step++) {
    double deadline = cco_deadline_after(bs->timeout);
    int sendIdx = mod(bs->rank - step, n), recvIdx = mod(bs->rank - step - 1, n);
    uint8_t in[CCO_WIRE_HEADER_BYTES];
    /* The message to the successor is tracked from its first byte: if this
     * rank fails before it is whole (its predecessor died, an ABORT came
     * in), the block is finished before any ABORT goes out behind it. */
    bs->tx.fd = bs->outFd[0];
    cco_wire_encode_header(bs->tx.head, CCO_MSG_DATA, (uint32_t)bytesPerRank, seq);
    bs->tx.headLen = CCO_WIRE_HEADER_BYTES;
    bs->tx.body = data + (size_t)sendIdx * bytesPerRank;
    bs->tx.bodyLen = bytesPerRank;
    bs->tx.sent = 0;
    /* Inline: the whole message (the same bytes as head then body, so
     * tx.sent keeps its meaning) while the predecessor's header comes in. */
    const void* out = bs->tx.head;
    size_t outLen = CCO_WIRE_HEADER_BYTES;
    if (inline_) {
      memcpy(msg, bs->tx.head, CCO_WIRE_HEADER_BYTES);
      if (bytesPerRank) memcpy(msg + CCO_WIRE_HEADER_BYTES, bs->tx.body, bytesPerRank);
      out = msg;
      outLen += bytesPerRank;
    }
    int bad = bs->inFd[0];
    cco_socket_xfer x = {bs->outFd[0], out, outLen, 0, bs->inFd[0], in, sizeof(in), 0};
    cco_io_status st = cco_socket_xfer_run(&x, deadline, bs->wakeFd, &bad);
    bs->tx.sent = x.sent;
    if (st != CCO_IO_OK) {
      res = ring_fail(bs, sink, st, bad);
      break;
    }
    res = check_header(bs, sink, in, bs->inFd[0], CCO_MSG_DATA, (uint32_t)bytesPerRank, seq, prev,
                       "allgather");
    if (res != ccoSuccess) break;
    size_t bodySent = bs->tx.sent - CCO_WIRE_HEADER_BYTES;
    x = (cco_socket_xfer){bs->outFd[0], bs->tx.body, bytesPerRank, bodySent,
                          bs->inFd[0],  data + (size_t)recvIdx * bytesPerRank, bytesPerRank, 0};
    st = cco_socket_xfer_run(&x, deadline, bs->wakeFd, &bad);
    bs->tx.sent = CCO_WIRE_HEADER_BYTES + x.sent;
    if (st != CCO_IO_OK) res = ring_fail(bs, sink, st, bad);
  }
  tx_end(bs);
  return res;
}

ccoResult_t cco_bootstrap_barrier(cco_bootstrap* bs, cco_errsink* sink) {
  if (!bs) return cco_error(sink, ccoInvalidArgument, CCO_SUBSYS_BOOT, "barrier: NULL bootstrap");
  CCO_CHECK(check_usable(bs, sink, "barrier"));
  uint32_t seq = ++bs->seq;
  ccoResult_t res = ccoSuccess;
  for (int k = 0; k < bs->nLinks && res == ccoSuccess; k++) {
    double deadline = cco_deadline_after(bs->timeout);
    int from = in_peer(bs, k);
    uint8_t in[CCO_WIRE_HEADER_BYTES];
    tx_begin(bs, bs->outFd[k], CCO_MSG_BARRIER, seq, NULL, 0);
    int bad = bs->inFd[k];
    cco_socket_xfer x = {bs->outFd[k], bs->tx.head, CCO_WIRE_HEADER_BYTES, 0,
                         bs->inFd[k],  in,          sizeof(in),            0};
    cco_io_status st = cco_socket_xfer_run(&x, deadline, bs->wakeFd, &bad);
    bs->tx.sent = x.sent;
    int peer = bad == bs->outFd[k] ? out_peer(bs, k) : from;
    if (st != CCO_IO_OK) res = io_fail_peer(bs, sink, st, peer, "barrier", bad, bs->inFd[k], from);
    else res = check_header(bs, sink, in, bs->inFd[k], CCO_MSG_BARRIER, 0, seq, from, "barrier");
  }
  tx_end(bs);
  return res;
}

/* ------------------------------------------------------------- teardown --- */

static void abort_fd(cco_bootstrap* bs, int fd, int halfSent, const char* reason, size_t n) {
  if (fd < 0) return;
  /* A stream in the middle of a message only gets shut down: its reader
   * sees the close and names this rank. */
  if (fd != halfSent) send_msg_nowait(fd, CCO_MSG_ABORT, reason, (uint32_t)n);
  /* Shut down but keep the fd until destroy, so its number is not reused
   * under a thread that still holds it. */
  shutdown(fd, SHUT_RDWR);
  (void)bs;
}

void cco_bootstrap_fail(cco_bootstrap* bs, ccoResult_t result, const char* reason) {
  if (!bs || bs->failResult != ccoSuccess) return;
  if (!reason) reason = "(no reason given)";
  bs->failResult = result == ccoSuccess ? ccoInternalError : result;
  snprintf(bs->failReason, sizeof(bs->failReason), "%s", reason);
  size_t n = strlen(reason);
  if (n > CCO_WIRE_TEXT_MAX) n = CCO_WIRE_TEXT_MAX;
  int halfSent = tx_at_boundary(bs) ? -1 : bs->tx.fd;
  tx_end(bs);
  for (int k = 0; k < bs->nLinks; k++) {
    abort_fd(bs, bs->outFd[k], halfSent, reason, n);
    abort_fd(bs, bs->inFd[k], halfSent, reason, n);
  }
  /* During creation: the joined ranks, or the root. */
  if (bs->joinFds)
    for (int r = 1; r < bs->nRanks; r++) abort_fd(bs, bs->joinFds[r], halfSent, reason, n);
  abort_fd(bs, bs->rootFd, halfSent, reason, n);
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
  if (!bs) return;
  /* After a clean run the accepting side resets its connections: every
   * collective is complete, so nothing in flight is needed, and no
   * TIME_WAIT is left on a listening port (create/destroy cycles would
   * otherwise use up the port range). After a failure the ABORTs must
   * still get out, so the close is orderly. */
  bool clean = bs->failResult == ccoSuccess;
  for (int k = 0; k < CCO_BOOTSTRAP_MAX_LINKS; k++) {
    cco_socket_close(&bs->outFd[k]);
    if (clean) cco_socket_close_reset(&bs->inFd[k]);
    else cco_socket_close(&bs->inFd[k]);
  }
  if (bs->joinFds) {
    for (int r = 0; r < bs->nRanks; r++) cco_socket_close(&bs->joinFds[r]);
    free(bs->joinFds);
    bs->joinFds = NULL;
  }
  cco_socket_close(&bs->rootFd);
  cco_socket_close(&bs->listenFd);
}
