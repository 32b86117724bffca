/*
 * Bootstrap wire format, version CCO_WIRE_VERSION. Every message is a
 * 16-byte header {magic u32, version u16, type u16, length u32, seq u32}
 * (little endian) and `length` payload bytes. Decoders never trust a length:
 * each checks it against what the message type allows before reading.
 */
#ifndef CCO_BOOT_WIRE_H_
#define CCO_BOOT_WIRE_H_

#include <stddef.h>
#include <stdint.h>

#include "boot/socket.h"

#define CCO_WIRE_MAGIC 0x57434f43u /* "COCW" little endian: 'C','O','C','W' */
#define CCO_WIRE_VERSION 1
#define CCO_WIRE_HEADER_BYTES 16
#define CCO_WIRE_ADDR_BYTES 24
#define CCO_WIRE_SECRET_BYTES 16
#define CCO_WIRE_HELLO_BYTES (CCO_WIRE_SECRET_BYTES + 16 + CCO_WIRE_ADDR_BYTES)
#define CCO_WIRE_TEXT_MAX 256

typedef enum {
  CCO_MSG_HELLO = 1,   /* joiner -> root, or link initiator -> acceptor */
  CCO_MSG_REFUSE = 2,  /* {code u32, reason text}: the connection is refused */
  CCO_MSG_PEERS = 3,   /* root -> rank: every rank's listening address */
  CCO_MSG_ACCEPT = 4,  /* acceptor -> initiator: the link is accepted */
  CCO_MSG_DATA = 5,    /* allgather block */
  CCO_MSG_BARRIER = 6, /* barrier token, no payload */
  CCO_MSG_ABORT = 7,   /* {reason text}: the sender failed; the job is over */
  CCO_MSG_BYE = 8,     /* no payload: the sender destroyed its communicator normally */
  CCO_MSG_TYPE_MAX = 8
} cco_msg_type;

/* JOIN: a rank joins at the root. LINK: a rank opens one of its links.
 * FAILED: a rank that failed before it could join (no listening socket)
 * tells the root, so the job fails at once; an ABORT with its reason follows
 * the hello, and the hello carries no address. */
typedef enum {
  CCO_HELLO_JOIN = 1,
  CCO_HELLO_LINK = 2,
  CCO_HELLO_FAILED = 3,
} cco_hello_purpose;

/* Decoder results (0 = ok). */
enum {
  CCO_WIRE_OK = 0,
  CCO_WIRE_ETRUNCATED = -1,
  CCO_WIRE_EMAGIC = -2,
  CCO_WIRE_EVERSION = -3,
  CCO_WIRE_ETYPE = -4,
  CCO_WIRE_ELENGTH = -5,
  CCO_WIRE_EVALUE = -6,
  CCO_WIRE_ERESERVED = -7, /* bytes that must be zero are not */
};
const char* cco_wire_strerror(int err);

typedef struct {
  uint16_t type;
  uint32_t length;
  uint32_t seq;
} cco_wire_header;

typedef struct {
  uint8_t secret[CCO_WIRE_SECRET_BYTES];
  uint32_t nRanks;
  uint32_t rank;
  uint32_t purpose; /* cco_hello_purpose */
  uint32_t link;    /* link index for CCO_HELLO_LINK */
  cco_sockaddr addr; /* joiner's listening address (JOIN) */
} cco_wire_hello;

void cco_wire_put_u16(uint8_t* p, uint16_t v);
void cco_wire_put_u32(uint8_t* p, uint32_t v);
uint16_t cco_wire_get_u16(const uint8_t* p);
uint32_t cco_wire_get_u32(const uint8_t* p);

void cco_wire_encode_header(uint8_t out[CCO_WIRE_HEADER_BYTES], uint16_t type, uint32_t length,
                            uint32_t seq);
/* Checks magic, version, type range, and that length <= maxLength. */
int cco_wire_decode_header(const uint8_t* buf, size_t len, uint32_t maxLength, cco_wire_header* h);

void cco_wire_encode_addr(const cco_sockaddr* a, uint8_t out[CCO_WIRE_ADDR_BYTES]);
int cco_wire_decode_addr(const uint8_t* buf, size_t len, cco_sockaddr* a);

void cco_wire_encode_hello(const cco_wire_hello* h, uint8_t out[CCO_WIRE_HELLO_BYTES]);
int cco_wire_decode_hello(const uint8_t* buf, size_t len, cco_wire_hello* h);

/* Text payloads (REFUSE reason after its code, ABORT reason): at most
 * CCO_WIRE_TEXT_MAX bytes, no NUL inside; out gets a NUL-terminated copy
 * with non-printable bytes replaced by '?'. */
int cco_wire_decode_text(const uint8_t* buf, size_t len, char* out, size_t outSize);

#endif /* CCO_BOOT_WIRE_H_ */
