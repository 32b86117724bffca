/* Encoders and bounds-checked decoders for the bootstrap wire format. */
#include "boot/wire.h"

#include <arpa/inet.h>
#include <string.h>

const char* cco_wire_strerror(int err) {
  switch (err) {
    case CCO_WIRE_OK: return "ok";
    case CCO_WIRE_ETRUNCATED: return "truncated message";
    case CCO_WIRE_EMAGIC: return "bad magic (not a cco peer)";
    case CCO_WIRE_EVERSION: return "wire version mismatch";
    case CCO_WIRE_ETYPE: return "unknown message type";
    case CCO_WIRE_ELENGTH: return "bad message length";
    case CCO_WIRE_EVALUE: return "bad field value";
    case CCO_WIRE_ERESERVED: return "reserved bytes are not zero";
  }
  return "?";
}

void cco_wire_put_u16(uint8_t* p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}
void cco_wire_put_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
uint16_t cco_wire_get_u16(const uint8_t* p) { return (uint16_t)(p[0] | (p[1] << 8)); }
uint32_t cco_wire_get_u32(const uint8_t* p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

void cco_wire_encode_header(uint8_t out[CCO_WIRE_HEADER_BYTES], uint16_t type, uint32_t length,
                            uint32_t seq) {
  cco_wire_put_u32(out, CCO_WIRE_MAGIC);
  cco_wire_put_u16(out + 4, CCO_WIRE_VERSION);
  cco_wire_put_u16(out + 6, type);
  cco_wire_put_u32(out + 8, length);
  cco_wire_put_u32(out + 12, seq);
}

int cco_wire_decode_header(const uint8_t* buf, size_t len, uint32_t maxLength, cco_wire_header* h) {
  if (!buf || len < CCO_WIRE_HEADER_BYTES) return CCO_WIRE_ETRUNCATED;
  if (cco_wire_get_u32(buf) != CCO_WIRE_MAGIC) return CCO_WIRE_EMAGIC;
  if (cco_wire_get_u16(buf + 4) != CCO_WIRE_VERSION) return CCO_WIRE_EVERSION;
  uint16_t type = cco_wire_get_u16(buf + 6);
  if (type < CCO_MSG_HELLO || type > CCO_MSG_TYPE_MAX) return CCO_WIRE_ETYPE;
  uint32_t length = cco_wire_get_u32(buf + 8);
  if (length > maxLength) return CCO_WIRE_ELENGTH;
  h->type = type;
  h->length = length;
  h->seq = cco_wire_get_u32(buf + 12);
  return CCO_WIRE_OK;
}

/* addr: {family u16 (4|6), port u16 (host order), addr[16], scope u32} */
void cco_wire_encode_addr(const cco_sockaddr* a, uint8_t out[CCO_WIRE_ADDR_BYTES]) {
  memset(out, 0, CCO_WIRE_ADDR_BYTES);
  if (a->ss.ss_family == AF_INET6) {
    const struct sockaddr_in6* s6 = (const struct sockaddr_in6*)&a->ss;
    cco_wire_put_u16(out, 6);
    cco_wire_put_u16(out + 2, ntohs(s6->sin6_port));
    memcpy(out + 4, &s6->sin6_addr, 16);
    cco_wire_put_u32(out + 20, s6->sin6_scope_id);
  } else if (a->ss.ss_family == AF_INET) {
    const struct sockaddr_in* s4 = (const struct sockaddr_in*)&a->ss;
    cco_wire_put_u16(out, 4);
    cco_wire_put_u16(out + 2, ntohs(s4->sin_port));
    memcpy(out + 4, &s4->sin_addr, 4);
  }
}

int cco_wire_decode_addr(const uint8_t* buf, size_t len, cco_sockaddr* a) {
  if (!buf || len < CCO_WIRE_ADDR_BYTES) return CCO_WIRE_ETRUNCATED;
  memset(a, 0, sizeof(*a));
  uint16_t family = cco_wire_get_u16(buf);
  uint16_t port = cco_wire_get_u16(buf + 2);
  if (family == 6) {
    struct sockaddr_in6* s6 = (struct sockaddr_in6*)&a->ss;
    s6->sin6_family = AF_INET6;
    s6->sin6_port = htons(port);
    memcpy(&s6->sin6_addr, buf + 4, 16);
    s6->sin6_scope_id = cco_wire_get_u32(buf + 20);
    return CCO_WIRE_OK;
  }
  if (family == 4) {
    struct sockaddr_in* s4 = (struct sockaddr_in*)&a->ss;
    s4->sin_family = AF_INET;
    s4->sin_port = htons(port);
    memcpy(&s4->sin_addr, buf + 4, 4);
    return CCO_WIRE_OK;
  }
  return CCO_WIRE_EVALUE;
}

void cco_wire_encode_hello(const cco_wire_hello* h, uint8_t out[CCO_WIRE_HELLO_BYTES]) {
  memcpy(out, h->secret, CCO_WIRE_SECRET_BYTES);
  uint8_t* p = out + CCO_WIRE_SECRET_BYTES;
  cco_wire_put_u32(p, h->nRanks);
  cco_wire_put_u32(p + 4, h->rank);
  cco_wire_put_u32(p + 8, h->purpose);
  cco_wire_put_u32(p + 12, h->link);
  cco_wire_encode_addr(&h->addr, p + 16);
}

int cco_wire_decode_hello(const uint8_t* buf, size_t len, cco_wire_hello* h) {
  if (!buf || len != CCO_WIRE_HELLO_BYTES) return len < CCO_WIRE_HELLO_BYTES ? CCO_WIRE_ETRUNCATED : CCO_WIRE_ELENGTH;
  cco_wire_hello out;
  memcpy(out.secret, buf, CCO_WIRE_SECRET_BYTES);
  const uint8_t* p = buf + CCO_WIRE_SECRET_BYTES;
  out.nRanks = cco_wire_get_u32(p);
  out.rank = cco_wire_get_u32(p + 4);
  out.purpose = cco_wire_get_u32(p + 8);
  out.link = cco_wire_get_u32(p + 12);
  if (out.purpose != CCO_HELLO_JOIN && out.purpose != CCO_HELLO_LINK &&
      out.purpose != CCO_HELLO_FAILED)
    return CCO_WIRE_EVALUE;
  if (out.nRanks == 0 || out.nRanks > (uint32_t)INT32_MAX) return CCO_WIRE_EVALUE;
  int err = cco_wire_decode_addr(p + 16, CCO_WIRE_ADDR_BYTES, &out.addr);
  /* Link and failure hellos carry no address; a join must carry a reachable one. */
  if (out.purpose == CCO_HELLO_JOIN) {
    if (err != CCO_WIRE_OK) return err;
    if (cco_sockaddr_port(&out.addr) == 0) return CCO_WIRE_EVALUE;
  }
  *h = out;
  return CCO_WIRE_OK;
}

int cco_wire_decode_text(const uint8_t* buf, size_t len, char* out, size_t outSize) {
  if (!out || outSize == 0) return CCO_WIRE_EVALUE;
  out[0] = '\0';
  if (len > CCO_WIRE_TEXT_MAX) return CCO_WIRE_ELENGTH;
  if (len > 0 && !buf) return CCO_WIRE_ETRUNCATED;
  size_t n = len < outSize - 1 ? len : outSize - 1;
  for (size_t i = 0; i < n; i++) {
    uint8_t c = buf[i];
    out[i] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
  }
  out[n] = '\0';
  return CCO_WIRE_OK;
}
