/*
 * Sockets for the bootstrap: addresses, interface choice, and non-blocking
 * I/O where every wait is bounded by a deadline and can be cut short by a
 * wake fd (ccoCommAbort).
 */
#ifndef CCO_BOOT_SOCKET_H_
#define CCO_BOOT_SOCKET_H_

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "cco/cco.h"

typedef struct {
  struct sockaddr_storage ss;
} cco_sockaddr;

/* Outcome of an I/O step; bootstrap turns it into a ccoResult_t with the
 * peer's rank in the message. */
typedef enum {
  CCO_IO_OK = 0,
  CCO_IO_CLOSED,  /* orderly EOF or connection reset by the peer */
  CCO_IO_TIMEOUT, /* the deadline passed */
  CCO_IO_WOKEN,   /* the wake fd fired (abort) */
  CCO_IO_ERROR,   /* any other errno; see errno */
} cco_io_status;

const char* cco_io_status_string(cco_io_status s);

/* Monotonic clock in seconds; deadline helper (timeout 0 = never). */
double cco_time_now(void);
double cco_deadline_after(double timeoutSeconds);

socklen_t cco_sockaddr_len(const cco_sockaddr* a);
int cco_sockaddr_family(const cco_sockaddr* a);
uint16_t cco_sockaddr_port(const cco_sockaddr* a);
void cco_sockaddr_set_port(cco_sockaddr* a, uint16_t port);
/* "1.2.3.4:5" or "[fe80::1%eth0]:5". */
const char* cco_sockaddr_str(const cco_sockaddr* a, char* buf, size_t size);

/* CCO_SOCKET_IFNAME grammar: "eth,ib" prefixes; "^docker,lo" excludes
 * prefixes; "=eth0" exact names ("^=" excludes exact names). Empty spec
 * matches everything. */
bool cco_ifname_matches(const char* spec, const char* ifname);

/* Picks an address for the bootstrap: the first interface (in getifaddrs
 * order) that matches `spec` and `family` (AF_UNSPEC for any) and is up.
 * With an empty spec, loopback, docker and virtual-bridge interfaces are
 * used only when nothing else exists. */
ccoResult_t cco_socket_pick_address(const char* spec, int family, cco_sockaddr* addr,
                                    char* ifname, size_t ifnameSize);

/* The local address the kernel would use to reach `remote` (routing). */
ccoResult_t cco_socket_route_source(const cco_sockaddr* remote, cco_sockaddr* local);

/* Non-blocking, close-on-exec listening socket bound to addr (port 0: any).
 * *bound receives the actual address. */
ccoResult_t cco_socket_listen(const cco_sockaddr* addr, bool reuseAddr, int* fd,
                              cco_sockaddr* bound);

/* Connects (non-blocking socket), retrying refused connections until the
 * deadline: the listener may not be up yet. */
cco_io_status cco_socket_connect(const cco_sockaddr* remote, double deadline, int wakeFd, int* fd);

/* The parts of a connect for an event loop: start returns 0 with *fd set
 * (connected, or in progress: wait until *fd is writable, then ask
 * cco_socket_connect_result), or the errno of a connect that failed at once.
 * cco_socket_connect_result returns 0 once connected, else the errno. */
int cco_socket_connect_start(const cco_sockaddr* remote, int* fd);
int cco_socket_connect_result(int fd);
/* Whether a connect that failed with `err` may succeed when tried again
 * (refused, unreachable, timed out, out of local ports). */
bool cco_socket_connect_retryable(int err);

/* Accepts one connection (non-blocking, close-on-exec, TCP_NODELAY). */
cco_io_status cco_socket_accept(int listenFd, double deadline, int wakeFd, int* fd);

cco_io_status cco_socket_send_all(int fd, const void* buf, size_t len, double deadline,
                                  int wakeFd);
cco_io_status cco_socket_recv_all(int fd, void* buf, size_t len, double deadline, int wakeFd);

/* One send and one receive in progress at once, resumable: sent and got
 * count what is done so far, so a call cut short (timeout, wake fd) can be
 * continued, and a caller knows whether a message went out whole. Either fd
 * may be -1 (length 0). */
typedef struct {
  int sendFd;
  const void* sendBuf;
  size_t sendLen, sent;
  int recvFd;
  void* recvBuf;
  size_t recvLen, got;
} cco_socket_xfer;

/* Runs x until both sides are done. On CLOSED or ERROR, *failedFd (if not
 * NULL) names the fd that failed. */
cco_io_status cco_socket_xfer_run(cco_socket_xfer* x, double deadline, int wakeFd, int* failedFd);

/* Sends one buffer and receives another at once, so two ranks exchanging
 * large messages cannot both block in send. Either fd may be -1 (len 0).
 * On CLOSED or ERROR, *failedFd (if not NULL) names the fd that failed. */
cco_io_status cco_socket_sendrecv(int sendFd, const void* sendBuf, size_t sendLen, int recvFd,
                                  void* recvBuf, size_t recvLen, double deadline, int wakeFd,
                                  int* failedFd);

/* Waits until fd is readable (or deadline / wake). */
cco_io_status cco_socket_wait_readable(int fd, double deadline, int wakeFd);

void cco_socket_close(int* fd);

/* Closes with a reset instead of an orderly shutdown (SO_LINGER 0): neither
 * side keeps the connection in TIME_WAIT. Only for connections whose unsent
 * bytes, if any, nobody needs. */
void cco_socket_close_reset(int* fd);

#endif /* CCO_BOOT_SOCKET_H_ */
