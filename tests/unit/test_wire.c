/* Unit tests for src/boot/wire.c: header, address, hello and text codecs. */
#include "boot/wire.h"

#include <arpa/inet.h>
#include <stdint.h>
#include <string.h>

#include "test.h"

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */
/* ------------------------------------------------------------------------ */

/* Fixed-seed xorshift64 so every run sees the same inputs. */
static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) {
  uint64_t x = g_rng;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  g_rng = x;
  return x;
}
static uint32_t rnd_below(uint32_t n) { return (uint32_t)(rnd() % n); }

static cco_sockaddr make_v4(const char* text, uint16_t port) {
  cco_sockaddr a;
  memset(&a, 0, sizeof(a));
  struct sockaddr_in* s4 = (struct sockaddr_in*)&a.ss;
  s4->sin_family = AF_INET;
  s4->sin_port = htons(port);
  if (inet_pton(AF_INET, text, &s4->sin_addr) != 1) abort();
  return a;
}

static cco_sockaddr make_v6(const char* text, uint16_t port, uint32_t scope) {
  cco_sockaddr a;
  memset(&a, 0, sizeof(a));
  struct sockaddr_in6* s6 = (struct sockaddr_in6*)&a.ss;
  s6->sin6_family = AF_INET6;
  s6->sin6_port = htons(port);
  s6->sin6_scope_id = scope;
  if (inet_pton(AF_INET6, text, &s6->sin6_addr) != 1) abort();
  return a;
}

/* Same family, port, address (and scope for IPv6). */
static int addr_equal(const cco_sockaddr* a, const cco_sockaddr* b) {
  if (a->ss.ss_family != b->ss.ss_family) return 0;
  if (a->ss.ss_family == AF_INET) {
    const struct sockaddr_in *x = (const struct sockaddr_in*)&a->ss,
                             *y = (const struct sockaddr_in*)&b->ss;
    return x->sin_port == y->sin_port && memcmp(&x->sin_addr, &y->sin_addr, 4) == 0;
  }
  if (a->ss.ss_family == AF_INET6) {
    const struct sockaddr_in6 *x = (const struct sockaddr_in6*)&a->ss,
                              *y = (const struct sockaddr_in6*)&b->ss;
    return x->sin6_port == y->sin6_port && x->sin6_scope_id == y->sin6_scope_id &&
           memcmp(&x->sin6_addr, &y->sin6_addr, 16) == 0;
  }
  return 1; /* neither: nothing to compare */
}

static cco_wire_hello make_hello(uint32_t purpose, const cco_sockaddr* addr) {
  cco_wire_hello h;
  memset(&h, 0, sizeof(h));
  for (int i = 0; i < CCO_WIRE_SECRET_BYTES; i++) h.secret[i] = (uint8_t)(0xA0 + i * 7);
  h.nRanks = 16;
  h.rank = 5;
  h.purpose = purpose;
  h.link = 3;
  h.addr = *addr;
  return h;
}

static int hello_equal(const cco_wire_hello* a, const cco_wire_hello* b, int compareAddr) {
  return memcmp(a->secret, b->secret, CCO_WIRE_SECRET_BYTES) == 0 && a->nRanks == b->nRanks &&
         a->rank == b->rank && a->purpose == b->purpose && a->link == b->link &&
         (!compareAddr || addr_equal(&a->addr, &b->addr));
}

#define HELLO_ADDR_OFF (CCO_WIRE_SECRET_BYTES + 16)

/* ------------------------------------------------------------------------ */
/* Integers and error strings                                               */
/* ------------------------------------------------------------------------ */

TEST(put_get_little_endian) {
  uint8_t b[4] = {0};
  cco_wire_put_u16(b, 0x1234);
  CHECK_EQ(b[0], 0x34);
  CHECK_EQ(b[1], 0x12);
  CHECK_EQ(cco_wire_get_u16(b), 0x1234);
  cco_wire_put_u32(b, 0xA1B2C3D4u);
  CHECK_EQ(b[0], 0xD4);
  CHECK_EQ(b[1], 0xC3);
  CHECK_EQ(b[2], 0xB2);
  CHECK_EQ(b[3], 0xA1);
  CHECK_EQ(cco_wire_get_u32(b), 0xA1B2C3D4u);
  cco_wire_put_u32(b, 0xFFFFFFFFu);
  CHECK_EQ(cco_wire_get_u32(b), 0xFFFFFFFFu);
  cco_wire_put_u16(b, 0xFFFF);
  CHECK_EQ(cco_wire_get_u16(b), 0xFFFF);
}

TEST(strerror_distinct) {
  const int codes[] = {CCO_WIRE_OK,     CCO_WIRE_ETRUNCATED, CCO_WIRE_EMAGIC, CCO_WIRE_EVERSION,
                       CCO_WIRE_ETYPE,  CCO_WIRE_ELENGTH,    CCO_WIRE_EVALUE, CCO_WIRE_ERESERVED};
  const int n = (int)(sizeof(codes) / sizeof(codes[0]));
  for (int i = 0; i < n; i++) {
    const char* s = cco_wire_strerror(codes[i]);
    CHECK(s != NULL && s[0] != '\0' && strcmp(s, "?") != 0);
    for (int j = 0; j < i; j++) CHECK(strcmp(s, cco_wire_strerror(codes[j])) != 0);
  }
  CHECK_STR(cco_wire_strerror(-99), "?");
  CHECK_STR(cco_wire_strerror(1), "?");
}

/* ------------------------------------------------------------------------ */
/* Header                                                                   */
/* ------------------------------------------------------------------------ */

TEST(header_layout) {
  uint8_t b[CCO_WIRE_HEADER_BYTES];
  cco_wire_encode_header(b, CCO_MSG_PEERS, 0x01020304u, 0x0A0B0C0Du);
  CHECK_EQ(b[0], 'C');
  CHECK_EQ(b[1], 'O');
  CHECK_EQ(b[2], 'C');
  CHECK_EQ(b[3], 'W');
  CHECK_EQ(cco_wire_get_u32(b), CCO_WIRE_MAGIC);
  CHECK_EQ(cco_wire_get_u16(b + 4), CCO_WIRE_VERSION);
  CHECK_EQ(cco_wire_get_u16(b + 6), CCO_MSG_PEERS);
  CHECK_EQ(cco_wire_get_u32(b + 8), 0x01020304u);
  CHECK_EQ(cco_wire_get_u32(b + 12), 0x0A0B0C0Du);
}

TEST(header_round_trip) {
  const uint32_t lengths[] = {0, 1, 56, 4096, 0x7FFFFFFFu, 0xFFFFFFFFu};
  const uint32_t seqs[] = {0, 1, 0x12345678u, 0xFFFFFFFFu};
  for (uint16_t type = CCO_MSG_HELLO; type <= CCO_MSG_TYPE_MAX; type++) {
    for (size_t li = 0; li < sizeof(lengths) / sizeof(lengths[0]); li++) {
      for (size_t si = 0; si < sizeof(seqs) / sizeof(seqs[0]); si++) {
        uint8_t b[CCO_WIRE_HEADER_BYTES + 4];
        cco_wire_encode_header(b, type, lengths[li], seqs[si]);
        cco_wire_header h = {0, 0, 0};
        /* Exactly the header, and with trailing payload bytes. */
        CHECK_EQ(cco_wire_decode_header(b, CCO_WIRE_HEADER_BYTES, 0xFFFFFFFFu, &h), CCO_WIRE_OK);
        CHECK_EQ(h.type, type);
        CHECK_EQ(h.length, lengths[li]);
        CHECK_EQ(h.seq, seqs[si]);
        memset(&h, 0, sizeof(h));
        CHECK_EQ(cco_wire_decode_header(b, sizeof(b), lengths[li], &h), CCO_WIRE_OK);
        CHECK_EQ(h.type, type);
        CHECK_EQ(h.length, lengths[li]);
        CHECK_EQ(h.seq, seqs[si]);
      }
    }
  }
}

TEST(header_truncated_every_length) {
  uint8_t b[CCO_WIRE_HEADER_BYTES];
  cco_wire_encode_header(b, CCO_MSG_DATA, 10, 77);
  for (size_t len = 0; len < CCO_WIRE_HEADER_BYTES; len++) {
    cco_wire_header h = {0xAAAA, 0xBBBBBBBBu, 0xCCCCCCCCu};
    CHECK_EQ(cco_wire_decode_header(b, len, 1000, &h), CCO_WIRE_ETRUNCATED);
    /* Nothing written on failure. */
    CHECK_EQ(h.type, 0xAAAA);
    CHECK_EQ(h.length, 0xBBBBBBBBu);
    CHECK_EQ(h.seq, 0xCCCCCCCCu);
  }
  cco_wire_header h;
  CHECK_EQ(cco_wire_decode_header(NULL, CCO_WIRE_HEADER_BYTES, 1000, &h), CCO_WIRE_ETRUNCATED);
  CHECK_EQ(cco_wire_decode_header(b, CCO_WIRE_HEADER_BYTES, 1000, &h), CCO_WIRE_OK);
}

TEST(header_bad_magic) {
  for (int i = 0; i < 4; i++) {
    for (int bit = 0; bit < 8; bit++) {
      uint8_t b[CCO_WIRE_HEADER_BYTES];
      cco_wire_encode_header(b, CCO_MSG_HELLO, 0, 0);
      b[i] ^= (uint8_t)(1u << bit);
      cco_wire_header h = {0xAAAA, 1, 2};
      CHECK_EQ(cco_wire_decode_header(b, sizeof(b), 1000, &h), CCO_WIRE_EMAGIC);
      CHECK_EQ(h.type, 0xAAAA);
    }
  }
  uint8_t zero[CCO_WIRE_HEADER_BYTES] = {0};
  cco_wire_header h;
  CHECK_EQ(cco_wire_decode_header(zero, sizeof(zero), 1000, &h), CCO_WIRE_EMAGIC);
}

TEST(header_bad_version) {
  const uint16_t versions[] = {0, CCO_WIRE_VERSION + 1, 0x0100, 0xFFFF};
  for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++) {
    uint8_t b[CCO_WIRE_HEADER_BYTES];
    cco_wire_encode_header(b, CCO_MSG_HELLO, 0, 0);
    cco_wire_put_u16(b + 4, versions[i]);
    cco_wire_header h = {0xAAAA, 1, 2};
    CHECK_EQ(cco_wire_decode_header(b, sizeof(b), 1000, &h), CCO_WIRE_EVERSION);
    CHECK_EQ(h.type, 0xAAAA);
  }
}

TEST(header_bad_type) {
  const uint16_t types[] = {0, CCO_MSG_TYPE_MAX + 1, 0x0100, 0xFFFF};
  for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
    uint8_t b[CCO_WIRE_HEADER_BYTES];
    cco_wire_encode_header(b, types[i], 0, 0);
    cco_wire_header h = {0xAAAA, 1, 2};
    CHECK_EQ(cco_wire_decode_header(b, sizeof(b), 1000, &h), CCO_WIRE_ETYPE);
    CHECK_EQ(h.type, 0xAAAA);
  }
}

TEST(header_length_over_max) {
  uint8_t b[CCO_WIRE_HEADER_BYTES];
  cco_wire_header h = {0xAAAA, 1, 2};
  cco_wire_encode_header(b, CCO_MSG_DATA, 101, 0);
  CHECK_EQ(cco_wire_decode_header(b, sizeof(b), 100, &h), CCO_WIRE_ELENGTH);
  CHECK_EQ(h.type, 0xAAAA);
  CHECK_EQ(cco_wire_decode_header(b, sizeof(b), 101, &h), CCO_WIRE_OK);
  CHECK_EQ(h.length, 101);
  cco_wire_encode_header(b, CCO_MSG_BARRIER, 1, 0);
  CHECK_EQ(cco_wire_decode_header(b, sizeof(b), 0, &h), CCO_WIRE_ELENGTH);
  cco_wire_encode_header(b, CCO_MSG_BARRIER, 0xFFFFFFFFu, 0);
  CHECK_EQ(cco_wire_decode_header(b, sizeof(b), 0xFFFFFFFEu, &h), CCO_WIRE_ELENGTH);
}

/* ------------------------------------------------------------------------ */
/* Address                                                                  */
/* ------------------------------------------------------------------------ */

TEST(addr_round_trip_and_layout) {
  cco_sockaddr v4 = make_v4("192.0.2.17", 29500);
  uint8_t b[CCO_WIRE_ADDR_BYTES];
  memset(b, 0xEE, sizeof(b));
  cco_wire_encode_addr(&v4, b);
  CHECK_EQ(cco_wire_get_u16(b), 4);
  CHECK_EQ(cco_wire_get_u16(b + 2), 29500);
  CHECK_EQ(b[4], 192);
  CHECK_EQ(b[5], 0);
  CHECK_EQ(b[6], 2);
  CHECK_EQ(b[7], 17);
  for (int i = 8; i < CCO_WIRE_ADDR_BYTES; i++) CHECK_EQ(b[i], 0);
  cco_sockaddr out;
  memset(&out, 0x5A, sizeof(out));
  CHECK_EQ(cco_wire_decode_addr(b, sizeof(b), &out), CCO_WIRE_OK);
  CHECK_EQ(out.ss.ss_family, AF_INET);
  CHECK(addr_equal(&out, &v4));

  cco_sockaddr v6 = make_v6("fe80::fc:ff:fe00:1", 65535, 7);
  cco_wire_encode_addr(&v6, b);
  CHECK_EQ(cco_wire_get_u16(b), 6);
  CHECK_EQ(cco_wire_get_u16(b + 2), 65535);
  CHECK_EQ(b[4], 0xfe);
  CHECK_EQ(b[5], 0x80);
  CHECK_EQ(b[19], 0x01);
  CHECK_EQ(cco_wire_get_u32(b + 20), 7);
  memset(&out, 0x5A, sizeof(out));
  CHECK_EQ(cco_wire_decode_addr(b, sizeof(b), &out), CCO_WIRE_OK);
  CHECK_EQ(out.ss.ss_family, AF_INET6);
  CHECK(addr_equal(&out, &v6));
  CHECK_EQ(ntohs(((struct sockaddr_in6*)&out.ss)->sin6_port), 65535);
  CHECK_EQ(((struct sockaddr_in6*)&out.ss)->sin6_scope_id, 7);
}

TEST(addr_bad_family) {
  /* The wire family is 4 or 6, not the AF_* constant of the host. */
  const uint16_t families[] = {0, 1, 5, 7, AF_INET, AF_INET6, 0x0400, 0x0600, 0xFFFF};
  for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++) {
    if (families[i] == 4 || families[i] == 6) continue;
    uint8_t b[CCO_WIRE_ADDR_BYTES] = {0};
    cco_wire_put_u16(b, families[i]);
    cco_wire_put_u16(b + 2, 1234);
    cco_sockaddr out;
    CHECK_EQ(cco_wire_decode_addr(b, sizeof(b), &out), CCO_WIRE_EVALUE);
  }
  /* An address of unknown family encodes as family 0, which decoding refuses. */
  cco_sockaddr unspec;
  memset(&unspec, 0, sizeof(unspec));
  uint8_t b[CCO_WIRE_ADDR_BYTES];
  memset(b, 0xEE, sizeof(b));
  cco_wire_encode_addr(&unspec, b);
  for (int i = 0; i < CCO_WIRE_ADDR_BYTES; i++) CHECK_EQ(b[i], 0);
  cco_sockaddr out;
  CHECK_EQ(cco_wire_decode_addr(b, sizeof(b), &out), CCO_WIRE_EVALUE);
}

TEST(addr_truncated) {
  cco_sockaddr v6 = make_v6("fd00::2", 1, 0);
  uint8_t b[CCO_WIRE_ADDR_BYTES];
  cco_wire_encode_addr(&v6, b);
  cco_sockaddr out;
  for (size_t len = 0; len < CCO_WIRE_ADDR_BYTES; len++)
    CHECK_EQ(cco_wire_decode_addr(b, len, &out), CCO_WIRE_ETRUNCATED);
  CHECK_EQ(cco_wire_decode_addr(NULL, CCO_WIRE_ADDR_BYTES, &out), CCO_WIRE_ETRUNCATED);
  CHECK_EQ(cco_wire_decode_addr(b, CCO_WIRE_ADDR_BYTES, &out), CCO_WIRE_OK);
}

/* ------------------------------------------------------------------------ */
/* Hello                                                                    */
/* ------------------------------------------------------------------------ */

TEST(hello_round_trip_ipv4) {
  cco_sockaddr a = make_v4("10.1.2.3", 40000);
  cco_wire_hello h = make_hello(CCO_HELLO_JOIN, &a);
  uint8_t b[CCO_WIRE_HELLO_BYTES];
  cco_wire_encode_hello(&h, b);
  CHECK(memcmp(b, h.secret, CCO_WIRE_SECRET_BYTES) == 0);
  CHECK_EQ(cco_wire_get_u32(b + 16), 16);
  CHECK_EQ(cco_wire_get_u32(b + 20), 5);
  CHECK_EQ(cco_wire_get_u32(b + 24), CCO_HELLO_JOIN);
  CHECK_EQ(cco_wire_get_u32(b + 28), 3);
  CHECK_EQ(cco_wire_get_u16(b + HELLO_ADDR_OFF), 4);
  cco_wire_hello out;
  memset(&out, 0, sizeof(out));
  CHECK_EQ(cco_wire_decode_hello(b, sizeof(b), &out), CCO_WIRE_OK);
  CHECK(hello_equal(&out, &h, 1));
  CHECK_EQ(out.addr.ss.ss_family, AF_INET);

  /* LINK hellos round trip too, including their address when valid. */
  h.purpose = CCO_HELLO_LINK;
  h.link = 30;
  cco_wire_encode_hello(&h, b);
  memset(&out, 0, sizeof(out));
  CHECK_EQ(cco_wire_decode_hello(b, sizeof(b), &out), CCO_WIRE_OK);
  CHECK(hello_equal(&out, &h, 1));
}

TEST(hello_round_trip_ipv6_scope) {
  cco_sockaddr a = make_v6("fe80::1234:5678:9abc:def0", 12345, 42);
  cco_wire_hello h = make_hello(CCO_HELLO_JOIN, &a);
  h.nRanks = (uint32_t)INT32_MAX;
  h.rank = (uint32_t)INT32_MAX - 1;
  uint8_t b[CCO_WIRE_HELLO_BYTES];
  cco_wire_encode_hello(&h, b);
  CHECK_EQ(cco_wire_get_u16(b + HELLO_ADDR_OFF), 6);
  CHECK_EQ(cco_wire_get_u32(b + HELLO_ADDR_OFF + 20), 42);
  cco_wire_hello out;
  memset(&out, 0, sizeof(out));
  CHECK_EQ(cco_wire_decode_hello(b, sizeof(b), &out), CCO_WIRE_OK);
  CHECK(hello_equal(&out, &h, 1));
  CHECK_EQ(out.addr.ss.ss_family, AF_INET6);
  CHECK_EQ(((struct sockaddr_in6*)&out.addr.ss)->sin6_scope_id, 42);
  CHECK_EQ(ntohs(((struct sockaddr_in6*)&out.addr.ss)->sin6_port), 12345);
}

TEST(hello_bad_purpose) {
  cco_sockaddr a = make_v4("10.0.0.1", 1);
  const uint32_t purposes[] = {0, 4, 0x100, 0xFFFFFFFFu};
  for (size_t i = 0; i < sizeof(purposes) / sizeof(purposes[0]); i++) {
    cco_wire_hello h = make_hello(purposes[i], &a);
    uint8_t b[CCO_WIRE_HELLO_BYTES];
    cco_wire_encode_hello(&h, b);
    cco_wire_hello out;
    memset(&out, 0x77, sizeof(out));
    CHECK_EQ(cco_wire_decode_hello(b, sizeof(b), &out), CCO_WIRE_EVALUE);
    CHECK_EQ(out.nRanks, 0x77777777u); /* untouched */
  }
}

/* A rank that failed before it could join says so with a FAILED hello: no
 * address (it has no listening socket), everything else as a join. */
TEST(hello_failed_purpose) {
  cco_sockaddr none;
  memset(&none, 0, sizeof(none));
  cco_wire_hello h = make_hello(CCO_HELLO_FAILED, &none);
  uint8_t b[CCO_WIRE_HELLO_BYTES];
  cco_wire_encode_hello(&h, b);
  cco_wire_hello out;
  memset(&out, 0x77, sizeof(out));
  CHECK_EQ(cco_wire_decode_hello(b, sizeof(b), &out), CCO_WIRE_OK);
  CHECK_EQ(out.purpose, CCO_HELLO_FAILED);
  CHECK(hello_equal(&out, &h, 0));
  h.nRanks = 0; /* the other fields are still checked */
  cco_wire_encode_hello(&h, b);
  CHECK_EQ(cco_wire_decode_hello(b, sizeof(b), &out), CCO_WIRE_EVALUE);
}

TEST(hello_bad_nranks) {
  cco_sockaddr a = make_v4("10.0.0.1", 1);
  const uint32_t bad[] = {0, (uint32_t)INT32_MAX + 1u, 0xFFFFFFFFu};
  for (uint32_t purpose = CCO_HELLO_JOIN; purpose <= CCO_HELLO_LINK; purpose++) {
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
      cco_wire_hello h = make_hello(purpose, &a);
      h.nRanks = bad[i];
      uint8_t b[CCO_WIRE_HELLO_BYTES];
      cco_wire_encode_hello(&h, b);
      cco_wire_hello out;
      memset(&out, 0x77, sizeof(out));
      CHECK_EQ(cco_wire_decode_hello(b, sizeof(b), &out), CCO_WIRE_EVALUE);
      CHECK_EQ(out.rank, 0x77777777u);
    }
    cco_wire_hello h = make_hello(purpose, &a);
    h.nRanks = 1;
    h.rank = 0;
    uint8_t b[CCO_WIRE_HELLO_BYTES];
    cco_wire_encode_hello(&h, b);
    cco_wire_hello out;
    CHECK_EQ(cco_wire_decode_hello(b, sizeof(b), &out), CCO_WIRE_OK);
    CHECK_EQ(out.nRanks, 1);
  }
}

TEST(hello_bad_family_join_vs_link) {
  cco_sockaddr a = make_v4("10.0.0.1", 1);
  const uint16_t families[] = {0, 5, AF_INET, AF_INET6, 0xFFFF};
  for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++) {
    cco_wire_hello h = make_hello(CCO_HELLO_JOIN, &a);
    uint8_t b[CCO_WIRE_HELLO_BYTES];
    cco_wire_encode_hello(&h, b);
    cco_wire_put_u16(b + HELLO_ADDR_OFF, families[i]);
    cco_wire_hello out;
    memset(&out, 0x77, sizeof(out));
    /* JOIN: the address is the joiner's listening address and must be valid. */
    CHECK_EQ(cco_wire_decode_hello(b, sizeof(b), &out), CCO_WIRE_EVALUE);
    CHECK_EQ(out.nRanks, 0x77777777u);

    /* LINK: the address is not used; the hello decodes. */
    cco_wire_put_u32(b + 24, CCO_HELLO_LINK);
    memset(&out, 0x77, sizeof(out));
    CHECK_EQ(cco_wire_decode_hello(b, sizeof(b), &out), CCO_WIRE_OK);
    CHECK(hello_equal(&out, &h, 0) == 0); /* purpose differs from h ... */
    h.purpose = CCO_HELLO_LINK;
    CHECK(hello_equal(&out, &h, 0)); /* ... and everything else matches */
    CHECK_EQ(out.addr.ss.ss_family, AF_UNSPEC);
  }
  /* A link hello with an all-zero address (what encode makes of "no address"). */
  cco_sockaddr none;
  memset(&none, 0, sizeof(none));
  cco_wire_hello h = make_hello(CCO_HELLO_LINK, &none);
  uint8_t b[CCO_WIRE_HELLO_BYTES];
  cco_wire_encode_hello(&h, b);
  cco_wire_hello out;
  CHECK_EQ(cco_wire_decode_hello(b, sizeof(b), &out), CCO_WIRE_OK);
  CHECK(hello_equal(&out, &h, 0));
  h.purpose = CCO_HELLO_JOIN;
  cco_wire_encode_hello(&h, b);
  CHECK_EQ(cco_wire_decode_hello(b, sizeof(b), &out), CCO_WIRE_EVALUE);
}

TEST(hello_wrong_lengths) {
  cco_sockaddr a = make_v4("10.0.0.1", 1);
  cco_wire_hello h = make_hello(CCO_HELLO_JOIN, &a);
  uint8_t b[CCO_WIRE_HELLO_BYTES + 8];
  memset(b, 0, sizeof(b));
  cco_wire_encode_hello(&h, b);
  for (size_t len = 0; len < CCO_WIRE_HELLO_BYTES; len++) {
    cco_wire_hello out;
    memset(&out, 0x77, sizeof(out));
    CHECK_EQ(cco_wire_decode_hello(b, len, &out), CCO_WIRE_ETRUNCATED);
    CHECK_EQ(out.nRanks, 0x77777777u);
  }
  for (size_t len = CCO_WIRE_HELLO_BYTES + 1; len <= sizeof(b); len++) {
    cco_wire_hello out;
    memset(&out, 0x77, sizeof(out));
    CHECK_EQ(cco_wire_decode_hello(b, len, &out), CCO_WIRE_ELENGTH);
    CHECK_EQ(out.nRanks, 0x77777777u);
  }
  cco_wire_hello out;
  CHECK(cco_wire_decode_hello(NULL, CCO_WIRE_HELLO_BYTES, &out) != CCO_WIRE_OK);
  CHECK_EQ(cco_wire_decode_hello(NULL, 0, &out), CCO_WIRE_ETRUNCATED);
  CHECK_EQ(cco_wire_decode_hello(b, CCO_WIRE_HELLO_BYTES, &out), CCO_WIRE_OK);
}

/* ------------------------------------------------------------------------ */
/* Text                                                                     */
/* ------------------------------------------------------------------------ */

TEST(text_plain) {
  const char* msg = "rank 3: peer closed the connection";
  char out[CCO_WIRE_TEXT_MAX + 1];
  CHECK_EQ(cco_wire_decode_text((const uint8_t*)msg, strlen(msg), out, sizeof(out)), CCO_WIRE_OK);
  CHECK_STR(out, msg);
}

TEST(text_non_printable) {
  const uint8_t in[] = {'a', 0x00, 'b', '\n', 0x1f, 0x7f, 0x80, 0xff, ' ', '~', '\t', 'z'};
  char out[64];
  memset(out, 'X', sizeof(out));
  CHECK_EQ(cco_wire_decode_text(in, sizeof(in), out, sizeof(out)), CCO_WIRE_OK);
  CHECK_STR(out, "a?b????? ~?z");
  CHECK_EQ(strlen(out), sizeof(in));
}

TEST(text_length_limits) {
  uint8_t in[CCO_WIRE_TEXT_MAX + 2];
  memset(in, 'q', sizeof(in));
  char out[CCO_WIRE_TEXT_MAX + 8];
  memset(out, 'X', sizeof(out));
  CHECK_EQ(cco_wire_decode_text(in, CCO_WIRE_TEXT_MAX, out, sizeof(out)), CCO_WIRE_OK);
  CHECK_EQ(strlen(out), CCO_WIRE_TEXT_MAX);
  memset(out, 'X', sizeof(out));
  CHECK_EQ(cco_wire_decode_text(in, CCO_WIRE_TEXT_MAX + 1, out, sizeof(out)), CCO_WIRE_ELENGTH);
  CHECK_EQ(out[0], '\0'); /* a failed decode still leaves a valid (empty) string */
  CHECK_EQ(cco_wire_decode_text(in, (size_t)-1, out, sizeof(out)), CCO_WIRE_ELENGTH);
  CHECK_EQ(out[0], '\0');
}

TEST(text_zero_length) {
  char out[8];
  memset(out, 'X', sizeof(out));
  const uint8_t in[] = {'a'};
  CHECK_EQ(cco_wire_decode_text(in, 0, out, sizeof(out)), CCO_WIRE_OK);
  CHECK_STR(out, "");
  memset(out, 'X', sizeof(out));
  CHECK_EQ(cco_wire_decode_text(NULL, 0, out, sizeof(out)), CCO_WIRE_OK);
  CHECK_STR(out, "");
  CHECK_EQ(cco_wire_decode_text(NULL, 5, out, sizeof(out)), CCO_WIRE_ETRUNCATED);
}

TEST(text_small_out_buffer) {
  const char* msg = "0123456789";
  char out[8];
  memset(out, 'X', sizeof(out));
  CHECK_EQ(cco_wire_decode_text((const uint8_t*)msg, 10, out, 5), CCO_WIRE_OK);
  CHECK_STR(out, "0123");
  CHECK_EQ(out[5], 'X'); /* nothing written past outSize */
  memset(out, 'X', sizeof(out));
  CHECK_EQ(cco_wire_decode_text((const uint8_t*)msg, 10, out, 1), CCO_WIRE_OK);
  CHECK_EQ(out[0], '\0');
  CHECK_EQ(out[1], 'X');
  memset(out, 'X', sizeof(out));
  CHECK_EQ(cco_wire_decode_text((const uint8_t*)msg, 10, out, 0), CCO_WIRE_EVALUE);
  CHECK_EQ(out[0], 'X');
  CHECK_EQ(cco_wire_decode_text((const uint8_t*)msg, 10, NULL, 8), CCO_WIRE_EVALUE);
}

/* ------------------------------------------------------------------------ */
/* Fuzzing                                                                  */
/* ------------------------------------------------------------------------ */

static int is_header_code(int e) {
  return e == CCO_WIRE_OK || e == CCO_WIRE_ETRUNCATED || e == CCO_WIRE_EMAGIC ||
         e == CCO_WIRE_EVERSION || e == CCO_WIRE_ETYPE || e == CCO_WIRE_ELENGTH;
}
static int is_hello_code(int e) {
  return e == CCO_WIRE_OK || e == CCO_WIRE_ETRUNCATED || e == CCO_WIRE_ELENGTH ||
         e == CCO_WIRE_EVALUE;
}
static int is_addr_code(int e) {
  return e == CCO_WIRE_OK || e == CCO_WIRE_ETRUNCATED || e == CCO_WIRE_EVALUE;
}

/* Bytes of an encoded addr that decoding ignores for the decoded family. */
static int addr_byte_ignored(const cco_sockaddr* decoded, int off) {
  if (decoded->ss.ss_family == AF_INET) return off >= 8;
  if (decoded->ss.ss_family == AF_INET6) return 0;
  return 1; /* no address (LINK hello with an invalid one) */
}

/* A decoded hello re-encodes to the buffer it came from, except in bytes
 * the decoder ignores; and decoding the re-encoding gives the same value. */
static int hello_reencodes(const uint8_t* buf, const cco_wire_hello* h) {
  uint8_t again[CCO_WIRE_HELLO_BYTES];
  cco_wire_encode_hello(h, again);
  for (int i = 0; i < CCO_WIRE_HELLO_BYTES; i++) {
    if (again[i] == buf[i]) continue;
    if (i >= HELLO_ADDR_OFF && addr_byte_ignored(&h->addr, i - HELLO_ADDR_OFF)) continue;
    return 0;
  }
  cco_wire_hello h2;
  if (cco_wire_decode_hello(again, sizeof(again), &h2) != CCO_WIRE_OK) return 0;
  return hello_equal(&h2, h, 1) && h2.addr.ss.ss_family == h->addr.ss.ss_family;
}

static void fill_random(uint8_t* b, size_t n) {
  for (size_t i = 0; i < n; i++) b[i] = (uint8_t)rnd();
}

TEST(fuzz_random_buffers) {
  g_rng = 0x0123456789abcdefull;
  uint8_t buf[200];
  char text[CCO_WIRE_TEXT_MAX + 64];
  long okHeader = 0, okHello = 0, okAddr = 0, okText = 0;
  for (int iter = 0; iter < 200000; iter++) {
    size_t len = rnd_below(201);
    fill_random(buf, sizeof(buf));
    /* Steer some inputs past the first checks so the later ones run too. */
    switch (iter % 4) {
      case 1:
        if (len >= 8) {
          cco_wire_put_u32(buf, CCO_WIRE_MAGIC);
          cco_wire_put_u16(buf + 4, CCO_WIRE_VERSION);
          if (rnd() & 1) cco_wire_put_u16(buf + 6, (uint16_t)rnd_below(CCO_MSG_TYPE_MAX + 2));
        }
        break;
      case 2:
        len = CCO_WIRE_HELLO_BYTES + (rnd() % 8 == 0 ? (size_t)rnd_below(3) - 1 : 0);
        cco_wire_put_u32(buf + 24, rnd_below(4));
        if (rnd() & 1) cco_wire_put_u32(buf + 16, rnd_below(64));
        if (rnd() & 1) cco_wire_put_u16(buf + HELLO_ADDR_OFF, (uint16_t)(rnd() & 1 ? 4 : 6));
        break;
      case 3:
        if (len >= 2) cco_wire_put_u16(buf, (uint16_t)rnd_below(8));
        break;
    }
    /* Exact-size copy so ASan catches any read past `len`. */
    uint8_t* exact = malloc(len ? len : 1);
    if (!exact) abort();
    memcpy(exact, buf, len);

    cco_wire_header h = {0, 0, 0};
    uint32_t maxLen = (uint32_t)rnd();
    int e = cco_wire_decode_header(exact, len, maxLen, &h);
    CHECK(is_header_code(e));
    if (e == CCO_WIRE_OK) {
      okHeader++;
      CHECK(len >= CCO_WIRE_HEADER_BYTES);
      CHECK(h.type >= CCO_MSG_HELLO && h.type <= CCO_MSG_TYPE_MAX);
      CHECK(h.length <= maxLen);
      uint8_t again[CCO_WIRE_HEADER_BYTES];
      cco_wire_encode_header(again, h.type, h.length, h.seq);
      CHECK(memcmp(again, exact, CCO_WIRE_HEADER_BYTES) == 0);
    }

    cco_wire_hello hello;
    e = cco_wire_decode_hello(exact, len, &hello);
    CHECK(is_hello_code(e));
    if (e == CCO_WIRE_OK) {
      okHello++;
      CHECK_EQ(len, CCO_WIRE_HELLO_BYTES);
      CHECK(hello.purpose == CCO_HELLO_JOIN || hello.purpose == CCO_HELLO_LINK ||
            hello.purpose == CCO_HELLO_FAILED);
      CHECK(hello.nRanks >= 1 && hello.nRanks <= (uint32_t)INT32_MAX);
      if (hello.purpose == CCO_HELLO_JOIN)
        CHECK(hello.addr.ss.ss_family == AF_INET || hello.addr.ss.ss_family == AF_INET6);
      CHECK(hello_reencodes(exact, &hello));
    }

    cco_sockaddr addr;
    e = cco_wire_decode_addr(exact, len, &addr);
    CHECK(is_addr_code(e));
    if (e == CCO_WIRE_OK) {
      okAddr++;
      CHECK(addr.ss.ss_family == AF_INET || addr.ss.ss_family == AF_INET6);
      uint8_t again[CCO_WIRE_ADDR_BYTES];
      cco_wire_encode_addr(&addr, again);
      for (int i = 0; i < CCO_WIRE_ADDR_BYTES; i++)
        CHECK(again[i] == exact[i] || addr_byte_ignored(&addr, i));
    }

    size_t outSize = 1 + rnd_below(sizeof(text) - 1);
    e = cco_wire_decode_text(exact, len, text, outSize);
    CHECK(e == CCO_WIRE_OK || e == CCO_WIRE_ELENGTH);
    if (e == CCO_WIRE_OK) {
      okText++;
      size_t want = len < outSize - 1 ? len : outSize - 1;
      CHECK_EQ(strlen(text), want);
      for (size_t i = 0; i < want; i++) CHECK(text[i] >= 0x20 && text[i] < 0x7f);
    }
    free(exact);
    if (cco_test_failed_) break; /* one report is enough */
  }
  /* Every decoder accepted a fair share of the steered inputs. */
  CHECK(okHeader > 1000);
  CHECK(okHello > 1000);
  CHECK(okAddr > 1000);
  CHECK(okText > 1000);
}

TEST(fuzz_hello_lengths_only_exact) {
  /* Longer random buffers: only the exact hello size ever decodes. */
  g_rng = 0xfeedfacecafebeefull;
  uint8_t buf[300];
  for (int iter = 0; iter < 20000; iter++) {
    size_t len = rnd_below(sizeof(buf) + 1);
    fill_random(buf, sizeof(buf));
    cco_wire_put_u32(buf + 24, CCO_HELLO_LINK);
    cco_wire_put_u32(buf + 16, 4);
    cco_wire_hello h;
    int e = cco_wire_decode_hello(buf, len, &h);
    if (len == CCO_WIRE_HELLO_BYTES) CHECK_EQ(e, CCO_WIRE_OK);
    else if (len < CCO_WIRE_HELLO_BYTES) CHECK_EQ(e, CCO_WIRE_ETRUNCATED);
    else CHECK_EQ(e, CCO_WIRE_ELENGTH);
  }
}

TEST(mutate_header_bits) {
  uint8_t orig[CCO_WIRE_HEADER_BYTES];
  cco_wire_encode_header(orig, CCO_MSG_ACCEPT, 24, 0x55AA0102u);
  for (int i = 0; i < CCO_WIRE_HEADER_BYTES; i++) {
    for (int bit = 0; bit < 9; bit++) {
      uint8_t b[CCO_WIRE_HEADER_BYTES];
      memcpy(b, orig, sizeof(b));
      b[i] ^= bit < 8 ? (uint8_t)(1u << bit) : 0xFF;
      cco_wire_header h;
      int e = cco_wire_decode_header(b, sizeof(b), 1u << 20, &h);
      CHECK(is_header_code(e) && e != CCO_WIRE_ETRUNCATED);
      if (i < 4) CHECK_EQ(e, CCO_WIRE_EMAGIC);
      else if (i < 6) CHECK_EQ(e, CCO_WIRE_EVERSION);
      if (e != CCO_WIRE_OK) continue;
      /* Decoded: the re-encoding is exactly the mutated buffer. */
      uint8_t again[CCO_WIRE_HEADER_BYTES];
      cco_wire_encode_header(again, h.type, h.length, h.seq);
      CHECK(memcmp(again, b, sizeof(b)) == 0);
      CHECK(memcmp(again, orig, sizeof(b)) != 0);
    }
  }
}

static void mutate_hello(const cco_wire_hello* h) {
  uint8_t orig[CCO_WIRE_HELLO_BYTES];
  cco_wire_encode_hello(h, orig);
  int decoded = 0, refused = 0;
  for (int i = 0; i < CCO_WIRE_HELLO_BYTES; i++) {
    for (int bit = 0; bit < 9; bit++) {
      uint8_t b[CCO_WIRE_HELLO_BYTES];
      memcpy(b, orig, sizeof(b));
      b[i] ^= bit < 8 ? (uint8_t)(1u << bit) : 0xFF;
      cco_wire_hello out;
      int e = cco_wire_decode_hello(b, sizeof(b), &out);
      CHECK(is_hello_code(e));
      if (e != CCO_WIRE_OK) {
        CHECK_EQ(e, CCO_WIRE_EVALUE);
        refused++;
        continue;
      }
      decoded++;
      CHECK(hello_reencodes(b, &out));
      /* A flip in secret or the integer fields always shows in the value. */
      if (i < HELLO_ADDR_OFF) CHECK(!hello_equal(&out, h, 0));
    }
  }
  CHECK(decoded > 0);
  CHECK(refused > 0);
}

TEST(mutate_hello_bits) {
  cco_sockaddr v4 = make_v4("172.16.5.9", 31000);
  cco_sockaddr v6 = make_v6("fd00::2", 31001, 0);
  cco_sockaddr v6s = make_v6("fe80::1", 31002, 9);
  cco_wire_hello h = make_hello(CCO_HELLO_JOIN, &v4);
  mutate_hello(&h);
  h = make_hello(CCO_HELLO_LINK, &v4);
  mutate_hello(&h);
  h = make_hello(CCO_HELLO_JOIN, &v6);
  mutate_hello(&h);
  h = make_hello(CCO_HELLO_LINK, &v6s);
  mutate_hello(&h);
}

TEST(mutate_addr_bits) {
  cco_sockaddr addrs[2] = {make_v4("198.51.100.7", 8080), make_v6("2001:db8::7", 8081, 3)};
  for (int k = 0; k < 2; k++) {
    uint8_t orig[CCO_WIRE_ADDR_BYTES];
    cco_wire_encode_addr(&addrs[k], orig);
    for (int i = 0; i < CCO_WIRE_ADDR_BYTES; i++) {
      for (int bit = 0; bit < 8; bit++) {
        uint8_t b[CCO_WIRE_ADDR_BYTES];
        memcpy(b, orig, sizeof(b));
        b[i] ^= (uint8_t)(1u << bit);
        cco_sockaddr out;
        int e = cco_wire_decode_addr(b, sizeof(b), &out);
        CHECK(is_addr_code(e) && e != CCO_WIRE_ETRUNCATED);
        if (e != CCO_WIRE_OK) {
          CHECK(i < 2); /* only the family can make it invalid */
          continue;
        }
        uint8_t again[CCO_WIRE_ADDR_BYTES];
        cco_wire_encode_addr(&out, again);
        for (int j = 0; j < CCO_WIRE_ADDR_BYTES; j++)
          CHECK(again[j] == b[j] || addr_byte_ignored(&out, j));
        cco_sockaddr out2;
        CHECK_EQ(cco_wire_decode_addr(again, sizeof(again), &out2), CCO_WIRE_OK);
        CHECK(addr_equal(&out, &out2));
      }
    }
  }
}

int main(void) { return RUN_TESTS(); }
