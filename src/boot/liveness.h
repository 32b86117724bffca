/*
 * Liveness monitor: one background thread per communicator that watches the
 * bootstrap links (ceil(log2 n) to each side, bootstrap.h) for a peer that
 * goes away, so that a job whose ranks wait only in device waits (no host
 * collective, no GDA proxy) still learns of a death.
 *
 * The thread only polls the links for a hang-up (POLLRDHUP, POLLHUP,
 * POLLERR) and never consumes a byte: the calling thread owns the streams
 * for the collectives. When a peer hangs up, every byte it sent is already
 * queued (TCP delivers the FIN last), so the end of the queue, read with
 * MSG_PEEK, tells how it left:
 *
 *   - a BYE header last: it destroyed its communicator normally
 *     (cco_liveness_goodbye, sent after its last collective message); the
 *     link is no longer watched;
 *   - an ABORT message last: it failed, and the message carries why;
 *   - anything else: it died (exited, crashed or was killed).
 *
 * A failure or a death is reported once, through `fail`, and the thread
 * then has nothing more to do. A hang-up of this rank's own making (its
 * bootstrap failed and shut the links down) is recognized by the TCP state
 * of the link (FIN sent) and ends the watch without a report; should one
 * slip through, the owner tells it apart (the bootstrap's failResult,
 * under its collective lock).
 *
 * Idle, the thread sleeps in poll without a timeout: it costs no CPU time.
 */
#ifndef CCO_BOOT_LIVENESS_H_
#define CCO_BOOT_LIVENESS_H_

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"
#include "boot/bootstrap.h"
#include "cco/cco.h"

typedef struct cco_liveness cco_liveness;

/* Called on the monitor's thread, at most once: `peer` failed or died;
 * `reason` names both ranks ("rank 1: rank 3 died: ..."). It may block
 * (take the owner's locks); stop waits for it to return. */
typedef void (*cco_liveness_fail_fn)(void* owner, ccoResult_t res, int peer, const char* reason);

/* Starts watching bs's links. With no links (one rank) no thread starts and
 * *out is NULL. The bootstrap's fds must stay open until stop. */
ccoResult_t cco_liveness_start(const cco_bootstrap* bs, cco_errsink* sink, cco_liveness_fail_fn fail,
                               void* owner, cco_liveness** out);

/* Stops and joins the thread, frees everything. NULL is a no-op. */
void cco_liveness_stop(cco_liveness* lv);

/* Looks at every link at once, from any thread, without changing anything
 * (peeks only): when a peer has hung up without a goodbye, writes what the
 * monitor reports for it into `reason` (a death before an ABORT, which only
 * passes a cause on) and returns true. For an owner told of a failure by
 * other means ("peer 3 unreachable", from a network engine) that wants its
 * cause. NULL: false. */
bool cco_liveness_probe(const cco_liveness* lv, char* reason, size_t size);

/* Tells every linked peer that this rank leaves normally: a BYE header on
 * every link, after everything the collectives sent (TCP keeps the order).
 * Call it last before the links close; nothing when the bootstrap failed
 * (its peers were told with ABORT). Bounded: at most about a second when a
 * peer does not read. */
void cco_liveness_goodbye(cco_bootstrap* bs);

#endif /* CCO_BOOT_LIVENESS_H_ */
