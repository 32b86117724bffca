/* Unit tests for the unique id: minting, hex text form, encode/decode. */
#include <arpa/inet.h>
#include <net/if.h>
#include <ctype.h>
#include <stdint.h>
#include <string.h>

#include "cco/cco.h"
#include "boot/bootstrap.h"
#include "boot/wire.h"
#include "test.h"

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */
/* ------------------------------------------------------------------------ */

static cco_id_info info_v4(const char* text, uint16_t port) {
  cco_id_info info;
  memset(&info, 0, sizeof(info));
  struct sockaddr_in* s4 = (struct sockaddr_in*)&info.root.ss;
  s4->sin_family = AF_INET;
  s4->sin_port = htons(port);
  if (inet_pton(AF_INET, text, &s4->sin_addr) != 1) abort();
  for (int i = 0; i < CCO_WIRE_SECRET_BYTES; i++) info.secret[i] = (uint8_t)(0x11 * (i + 1));
  return info;
}

static cco_id_info info_v6(const char* text, uint16_t port, uint32_t scope) {
  cco_id_info info;
  memset(&info, 0, sizeof(info));
  struct sockaddr_in6* s6 = (struct sockaddr_in6*)&info.root.ss;
  s6->sin6_family = AF_INET6;
  s6->sin6_port = htons(port);
  s6->sin6_scope_id = scope;
  if (inet_pton(AF_INET6, text, &s6->sin6_addr) != 1) abort();
  for (int i = 0; i < CCO_WIRE_SECRET_BYTES; i++) info.secret[i] = (uint8_t)(0xF0 - 3 * i);
  return info;
}

static int info_equal(const cco_id_info* a, const cco_id_info* b) {
  if (memcmp(a->secret, b->secret, CCO_WIRE_SECRET_BYTES) != 0) return 0;
  if (a->root.ss.ss_family != b->root.ss.ss_family) return 0;
  if (a->root.ss.ss_family == AF_INET) {
    const struct sockaddr_in *x = (const struct sockaddr_in*)&a->root.ss,
                             *y = (const struct sockaddr_in*)&b->root.ss;
    return x->sin_port == y->sin_port && memcmp(&x->sin_addr, &y->sin_addr, 4) == 0;
  }
  if (a->root.ss.ss_family == AF_INET6) {
    const struct sockaddr_in6 *x = (const struct sockaddr_in6*)&a->root.ss,
                              *y = (const struct sockaddr_in6*)&b->root.ss;
    return x->sin6_port == y->sin6_port && x->sin6_scope_id == y->sin6_scope_id &&
           memcmp(&x->sin6_addr, &y->sin6_addr, 16) == 0;
  }
  return 0;
}

static uint8_t idbyte(const ccoUniqueId* id, int i) { return (uint8_t)id->internal[i]; }

static void to_text(const ccoUniqueId* id, char text[CCO_UNIQUE_ID_STRING_BYTES]) {
  if (ccoUniqueIdToString(id, text, CCO_UNIQUE_ID_STRING_BYTES) != ccoSuccess) abort();
}

/* FromString refuses `text` with ccoInvalidArgument, leaves the output alone
 * and leaves a last-error detail containing `needle`. */
static void expect_rejected(const char* text, const char* needle) {
  ccoUniqueId out;
  memset(&out, 0xAB, sizeof(out));
  ccoResult_t r = ccoUniqueIdFromString(text, &out);
  CHECK_EQ(r, ccoInvalidArgument);
  int untouched = 1;
  for (int i = 0; i < CCO_UNIQUE_ID_BYTES; i++) untouched &= idbyte(&out, i) == 0xAB;
  CHECK(untouched);
  const char* err = ccoGetLastError(NULL);
  CHECK(err != NULL && err[0] != '\0');
  if (needle && !strstr(err, needle)) {
    fprintf(stderr, "  last error '%s' does not mention '%s'\n", err, needle);
    CHECK(0);
  }
}

/* ------------------------------------------------------------------------ */
/* Minting                                                                  */
/* ------------------------------------------------------------------------ */

TEST(get_unique_id) {
  ccoUniqueId id;
  memset(&id, 0, sizeof(id));
  ccoResult_t r = ccoGetUniqueId(&id);
  if (r != ccoSuccess) fprintf(stderr, "  ccoGetUniqueId: %s\n", ccoGetLastError(NULL));
  CHECK_EQ(r, ccoSuccess);
  cco_id_info info;
  CHECK_EQ(cco_uniqueid_decode(&id, &info), CCO_WIRE_OK);
  int fam = cco_sockaddr_family(&info.root);
  CHECK(fam == AF_INET || fam == AF_INET6);
  CHECK(cco_sockaddr_port(&info.root) != 0);
  int nonzero = 0;
  for (int i = 0; i < CCO_WIRE_SECRET_BYTES; i++) nonzero |= info.secret[i];
  CHECK(nonzero);
  /* The minted id is a fixed point of encode. */
  ccoUniqueId again;
  cco_uniqueid_encode(&info, &again);
  CHECK(memcmp(&again, &id, sizeof(id)) == 0);
}

TEST(get_unique_id_secrets_differ) {
  ccoUniqueId a, b;
  CHECK_EQ(ccoGetUniqueId(&a), ccoSuccess);
  CHECK_EQ(ccoGetUniqueId(&b), ccoSuccess);
  cco_id_info ia, ib;
  CHECK_EQ(cco_uniqueid_decode(&a, &ia), CCO_WIRE_OK);
  CHECK_EQ(cco_uniqueid_decode(&b, &ib), CCO_WIRE_OK);
  CHECK(memcmp(ia.secret, ib.secret, CCO_WIRE_SECRET_BYTES) != 0);
  CHECK(memcmp(&a, &b, sizeof(a)) != 0);
}

TEST(get_unique_id_null) {
  CHECK_EQ(ccoGetUniqueId(NULL), ccoInvalidArgument);
  CHECK(ccoGetLastError(NULL)[0] != '\0');
}

/* ------------------------------------------------------------------------ */
/* To string                                                                */
/* ------------------------------------------------------------------------ */

TEST(to_string_format) {
  ccoUniqueId id;
  for (int i = 0; i < CCO_UNIQUE_ID_BYTES; i++) id.internal[i] = (char)(uint8_t)(i * 37 + 5);
  char text[CCO_UNIQUE_ID_STRING_BYTES + 4];
  memset(text, 'X', sizeof(text));
  CHECK_EQ(ccoUniqueIdToString(&id, text, CCO_UNIQUE_ID_STRING_BYTES), ccoSuccess);
  CHECK_EQ(strlen(text), 2 * CCO_UNIQUE_ID_BYTES);
  CHECK_EQ(text[CCO_UNIQUE_ID_STRING_BYTES], 'X'); /* nothing past the NUL */
  for (int i = 0; i < 2 * CCO_UNIQUE_ID_BYTES; i++)
    CHECK((text[i] >= '0' && text[i] <= '9') || (text[i] >= 'a' && text[i] <= 'f'));
  for (int i = 0; i < CCO_UNIQUE_ID_BYTES; i++) {
    char want[3];
    snprintf(want, sizeof(want), "%02x", idbyte(&id, i));
    CHECK(text[2 * i] == want[0] && text[2 * i + 1] == want[1]);
  }
  /* Extremes. */
  memset(&id, 0xFF, sizeof(id));
  CHECK_EQ(ccoUniqueIdToString(&id, text, sizeof(text)), ccoSuccess);
  for (int i = 0; i < 2 * CCO_UNIQUE_ID_BYTES; i++) CHECK_EQ(text[i], 'f');
  memset(&id, 0, sizeof(id));
  CHECK_EQ(ccoUniqueIdToString(&id, text, sizeof(text)), ccoSuccess);
  for (int i = 0; i < 2 * CCO_UNIQUE_ID_BYTES; i++) CHECK_EQ(text[i], '0');
}

TEST(to_string_small_buffer) {
  ccoUniqueId id;
  memset(&id, 0x3C, sizeof(id));
  char text[CCO_UNIQUE_ID_STRING_BYTES];
  memset(text, 'X', sizeof(text));
  CHECK_EQ(ccoUniqueIdToString(&id, text, CCO_UNIQUE_ID_STRING_BYTES - 1), ccoInvalidArgument);
  CHECK_EQ(text[0], 'X'); /* outputs are written only on success */
  CHECK(strstr(ccoGetLastError(NULL), "small") != NULL);
  CHECK_EQ(ccoUniqueIdToString(&id, text, 0), ccoInvalidArgument);
  CHECK_EQ(text[0], 'X');
  CHECK_EQ(ccoUniqueIdToString(&id, text, CCO_UNIQUE_ID_STRING_BYTES), ccoSuccess);
}

TEST(to_string_null_args) {
  ccoUniqueId id;
  memset(&id, 0, sizeof(id));
  char text[CCO_UNIQUE_ID_STRING_BYTES];
  CHECK_EQ(ccoUniqueIdToString(NULL, text, sizeof(text)), ccoInvalidArgument);
  CHECK_EQ(ccoUniqueIdToString(&id, NULL, sizeof(text)), ccoInvalidArgument);
  CHECK_EQ(ccoUniqueIdToString(NULL, NULL, 0), ccoInvalidArgument);
  CHECK(strstr(ccoGetLastError(NULL), "NULL") != NULL);
}

/* ------------------------------------------------------------------------ */
/* From string                                                              */
/* ------------------------------------------------------------------------ */

TEST(from_string_round_trip) {
  cco_id_info infos[2] = {info_v4("192.0.2.2", 29500), info_v6("fd00::2", 443, 0)};
  for (int k = 0; k < 2; k++) {
    ccoUniqueId id, out;
    cco_uniqueid_encode(&infos[k], &id);
    char text[CCO_UNIQUE_ID_STRING_BYTES];
    to_text(&id, text);
    memset(&out, 0, sizeof(out));
    CHECK_EQ(ccoUniqueIdFromString(text, &out), ccoSuccess);
    CHECK(memcmp(&out, &id, sizeof(id)) == 0);
    cco_id_info back;
    CHECK_EQ(cco_uniqueid_decode(&out, &back), CCO_WIRE_OK);
    CHECK(info_equal(&back, &infos[k]));
  }
  /* A minted id round-trips too. */
  ccoUniqueId id, out;
  CHECK_EQ(ccoGetUniqueId(&id), ccoSuccess);
  char text[CCO_UNIQUE_ID_STRING_BYTES];
  to_text(&id, text);
  CHECK_EQ(ccoUniqueIdFromString(text, &out), ccoSuccess);
  CHECK(memcmp(&out, &id, sizeof(id)) == 0);
}

TEST(from_string_whitespace_and_case) {
  cco_id_info info = info_v6("2001:db8::abcd", 5000, 0);
  ccoUniqueId id;
  cco_uniqueid_encode(&info, &id);
  char text[CCO_UNIQUE_ID_STRING_BYTES];
  to_text(&id, text);

  char padded[CCO_UNIQUE_ID_STRING_BYTES + 16];
  snprintf(padded, sizeof(padded), " \t\n%s \r\n\t", text);
  ccoUniqueId out;
  memset(&out, 0, sizeof(out));
  CHECK_EQ(ccoUniqueIdFromString(padded, &out), ccoSuccess);
  CHECK(memcmp(&out, &id, sizeof(id)) == 0);

  char upper[CCO_UNIQUE_ID_STRING_BYTES];
  int changed = 0;
  for (int i = 0; i < CCO_UNIQUE_ID_STRING_BYTES; i++) {
    upper[i] = (char)toupper((unsigned char)text[i]);
    changed |= upper[i] != text[i];
  }
  CHECK(changed); /* the secret has a-f digits, so the test is meaningful */
  memset(&out, 0, sizeof(out));
  CHECK_EQ(ccoUniqueIdFromString(upper, &out), ccoSuccess);
  CHECK(memcmp(&out, &id, sizeof(id)) == 0);

  /* Mixed case. */
  for (int i = 0; i < CCO_UNIQUE_ID_STRING_BYTES; i += 2) upper[i] = text[i];
  memset(&out, 0, sizeof(out));
  CHECK_EQ(ccoUniqueIdFromString(upper, &out), ccoSuccess);
  CHECK(memcmp(&out, &id, sizeof(id)) == 0);
}

TEST(from_string_wrong_length) {
  cco_id_info info = info_v4("10.0.0.1", 1234);
  ccoUniqueId id;
  cco_uniqueid_encode(&info, &id);
  char text[CCO_UNIQUE_ID_STRING_BYTES];
  to_text(&id, text);

  char shorter[CCO_UNIQUE_ID_STRING_BYTES];
  memcpy(shorter, text, 2 * CCO_UNIQUE_ID_BYTES - 1);
  shorter[2 * CCO_UNIQUE_ID_BYTES - 1] = '\0';
  expect_rejected(shorter, "characters");
  shorter[2 * CCO_UNIQUE_ID_BYTES - 2] = '\0';
  expect_rejected(shorter, "characters");

  char longer[CCO_UNIQUE_ID_STRING_BYTES + 8];
  snprintf(longer, sizeof(longer), "%s0", text);
  expect_rejected(longer, "characters");
  snprintf(longer, sizeof(longer), "%s00", text);
  expect_rejected(longer, "characters");
  snprintf(longer, sizeof(longer), "0x%s", text);
  expect_rejected(longer, "characters");

  expect_rejected("", "characters");
  expect_rejected("   \t\n ", "characters");
  expect_rejected("00", "characters");
}

TEST(from_string_non_hex) {
  cco_id_info info = info_v4("10.0.0.1", 1234);
  ccoUniqueId id;
  cco_uniqueid_encode(&info, &id);
  char text[CCO_UNIQUE_ID_STRING_BYTES];
  to_text(&id, text);
  const int positions[] = {0, 1, 100, 2 * CCO_UNIQUE_ID_BYTES - 1};
  const char bad[] = {'g', 'G', ' ', '-', 'x', ':', '\x7f', '\xc3'};
  for (size_t p = 0; p < sizeof(positions) / sizeof(positions[0]); p++) {
    for (size_t c = 0; c < sizeof(bad); c++) {
      /* A space at either end would be trimmed and change the length. */
      if (bad[c] == ' ' && (positions[p] == 0 || positions[p] == 2 * CCO_UNIQUE_ID_BYTES - 1))
        continue;
      char t[CCO_UNIQUE_ID_STRING_BYTES];
      memcpy(t, text, sizeof(t));
      t[positions[p]] = bad[c];
      expect_rejected(t, "non-hex");
    }
  }
}

/* Builds the text form of a valid id after `edit` changed some bytes. */
static void edited_text(const cco_id_info* info, int off, const uint8_t* bytes, int n,
                        char text[CCO_UNIQUE_ID_STRING_BYTES]) {
  ccoUniqueId id;
  cco_uniqueid_encode(info, &id);
  for (int i = 0; i < n; i++) id.internal[off + i] = (char)bytes[i];
  to_text(&id, text);
}

TEST(from_string_invalid_content) {
  cco_id_info info = info_v4("10.0.0.1", 1234);
  char text[CCO_UNIQUE_ID_STRING_BYTES];
  /* Sanity: unedited, the text is accepted. */
  edited_text(&info, 0, NULL, 0, text);
  ccoUniqueId out;
  CHECK_EQ(ccoUniqueIdFromString(text, &out), ccoSuccess);

  const uint8_t magic[] = {'C', 'C', 'O', 'J'};
  edited_text(&info, 0, magic, 4, text);
  expect_rejected(text, "magic");
  const uint8_t zeros4[] = {0, 0, 0, 0};
  edited_text(&info, 0, zeros4, 4, text);
  expect_rejected(text, "magic");

  const uint8_t version0[] = {0, 0}, version2[] = {CCO_WIRE_VERSION + 1, 0}, versionHi[] = {1, 1};
  edited_text(&info, 4, version0, 2, text);
  expect_rejected(text, "version");
  edited_text(&info, 4, version2, 2, text);
  expect_rejected(text, "version");
  edited_text(&info, 4, versionHi, 2, text);
  expect_rejected(text, "version");

  const uint8_t fam0[] = {0, 0}, fam5[] = {5, 0}, famAf6[] = {AF_INET6, 0}, fam4hi[] = {4, 1};
  edited_text(&info, 6, fam0, 2, text);
  expect_rejected(text, "not a valid cco unique id");
  edited_text(&info, 6, fam5, 2, text);
  expect_rejected(text, "not a valid cco unique id");
  edited_text(&info, 6, famAf6, 2, text);
  expect_rejected(text, "not a valid cco unique id");
  edited_text(&info, 6, fam4hi, 2, text);
  expect_rejected(text, "not a valid cco unique id");

  const uint8_t port0[] = {0, 0};
  edited_text(&info, 8, port0, 2, text);
  expect_rejected(text, "not a valid cco unique id");
  cco_id_info info6 = info_v6("fd00::2", 77, 0);
  edited_text(&info6, 8, port0, 2, text);
  expect_rejected(text, "not a valid cco unique id");

  /* Changing the family between 4 and 6 keeps a valid id. */
  const uint8_t fam6[] = {6, 0};
  edited_text(&info, 6, fam6, 2, text);
  CHECK_EQ(ccoUniqueIdFromString(text, &out), ccoSuccess);
}

TEST(from_string_null_args) {
  ccoUniqueId out;
  memset(&out, 0xAB, sizeof(out));
  CHECK_EQ(ccoUniqueIdFromString(NULL, &out), ccoInvalidArgument);
  CHECK_EQ(idbyte(&out, 0), 0xAB);
  cco_id_info info = info_v4("10.0.0.1", 1234);
  ccoUniqueId id;
  cco_uniqueid_encode(&info, &id);
  char text[CCO_UNIQUE_ID_STRING_BYTES];
  to_text(&id, text);
  CHECK_EQ(ccoUniqueIdFromString(text, NULL), ccoInvalidArgument);
  CHECK(strstr(ccoGetLastError(NULL), "NULL") != NULL);
}

/* ------------------------------------------------------------------------ */
/* Encode / decode                                                          */
/* ------------------------------------------------------------------------ */

TEST(encode_layout_ipv4) {
  cco_id_info info = info_v4("192.0.2.2", 0xBEEF);
  ccoUniqueId id;
  memset(&id, 0x5A, sizeof(id));
  cco_uniqueid_encode(&info, &id);
  CHECK(memcmp(id.internal, "CCOI", 4) == 0);
  CHECK_EQ(cco_wire_get_u16((const uint8_t*)id.internal + 4), CCO_WIRE_VERSION);
  CHECK_EQ(cco_wire_get_u16((const uint8_t*)id.internal + 6), 4);
  CHECK_EQ(cco_wire_get_u16((const uint8_t*)id.internal + 8), 0xBEEF);
  CHECK_EQ(idbyte(&id, 10), 0);
  CHECK_EQ(idbyte(&id, 11), 0);
  CHECK_EQ(idbyte(&id, 12), 192);
  CHECK_EQ(idbyte(&id, 13), 0);
  CHECK_EQ(idbyte(&id, 14), 2);
  CHECK_EQ(idbyte(&id, 15), 2);
  for (int i = 16; i < 32; i++) CHECK_EQ(idbyte(&id, i), 0);
  CHECK(memcmp(id.internal + 32, info.secret, CCO_WIRE_SECRET_BYTES) == 0);
  for (int i = 48; i < CCO_UNIQUE_ID_BYTES; i++) CHECK_EQ(idbyte(&id, i), 0);
}

TEST(encode_decode_ipv4) {
  const uint16_t ports[] = {1, 29500, 65535};
  for (size_t k = 0; k < sizeof(ports) / sizeof(ports[0]); k++) {
    cco_id_info info = info_v4("203.0.113.250", ports[k]);
    info.secret[0] = (uint8_t)k;
    ccoUniqueId id;
    cco_uniqueid_encode(&info, &id);
    cco_id_info back;
    memset(&back, 0, sizeof(back));
    CHECK_EQ(cco_uniqueid_decode(&id, &back), CCO_WIRE_OK);
    CHECK(info_equal(&back, &info));
    CHECK_EQ(cco_sockaddr_family(&back.root), AF_INET);
    CHECK_EQ(cco_sockaddr_port(&back.root), ports[k]);
  }
}

TEST(encode_decode_ipv6_scope) {
  cco_id_info info = info_v6("fe80::fc:ff:fe00:1", 40404, 0x01020304u);
  ccoUniqueId id;
  cco_uniqueid_encode(&info, &id);
  CHECK_EQ(cco_wire_get_u16((const uint8_t*)id.internal + 6), 6);
  CHECK_EQ(idbyte(&id, 12), 0xfe);
  CHECK_EQ(idbyte(&id, 13), 0x80);
  CHECK_EQ(cco_wire_get_u32((const uint8_t*)id.internal + 28), 0x01020304u);
  cco_id_info back;
  memset(&back, 0, sizeof(back));
  CHECK_EQ(cco_uniqueid_decode(&id, &back), CCO_WIRE_OK);
  CHECK(info_equal(&back, &info));
  CHECK_EQ(cco_sockaddr_family(&back.root), AF_INET6);
  CHECK_EQ(cco_sockaddr_port(&back.root), 40404);
  CHECK_EQ(((struct sockaddr_in6*)&back.root.ss)->sin6_scope_id, 0x01020304u);
  /* Decoding the secret alone: flip one secret bit and it shows. */
  id.internal[40] ^= 0x10;
  CHECK_EQ(cco_uniqueid_decode(&id, &back), CCO_WIRE_OK);
  CHECK(!info_equal(&back, &info));
}

TEST(root_address) {
  char text[CCO_UNIQUE_ID_ADDRESS_STRING_BYTES];
  ccoUniqueId id;
  cco_id_info v4 = info_v4("192.0.2.7", 23456);
  cco_uniqueid_encode(&v4, &id);
  CHECK_EQ(ccoUniqueIdGetRootAddress(&id, text, sizeof(text)), ccoSuccess);
  CHECK_STR(text, "192.0.2.7:23456");
  /* Scope 1 is an interface of every Linux machine (lo), so its name shows. */
  char lo[IF_NAMESIZE];
  CHECK(if_indextoname(1, lo) != NULL);
  cco_id_info v6 = info_v6("fe80::fc:ff:fe00:1", 40404, 1);
  cco_uniqueid_encode(&v6, &id);
  CHECK_EQ(ccoUniqueIdGetRootAddress(&id, text, sizeof(text)), ccoSuccess);
  char want[CCO_UNIQUE_ID_ADDRESS_STRING_BYTES];
  snprintf(want, sizeof(want), "[fe80::fc:ff:fe00:1%%%s]:40404", lo);
  CHECK_STR(text, want);
  /* The longest form fits: a full IPv6 address and a 15-character interface
   * name (an index no interface has prints no name, so it is the address). */
  cco_id_info wide = info_v6("ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255", 65535, 0);
  cco_uniqueid_encode(&wide, &id);
  CHECK_EQ(ccoUniqueIdGetRootAddress(&id, text, sizeof(text)), ccoSuccess);
  CHECK(strlen(text) + IF_NAMESIZE + 1 < CCO_UNIQUE_ID_ADDRESS_STRING_BYTES);
}

TEST(root_address_bad_args) {
  char text[CCO_UNIQUE_ID_ADDRESS_STRING_BYTES] = "untouched";
  ccoUniqueId id;
  cco_id_info v4 = info_v4("10.0.0.1", 1234);
  cco_uniqueid_encode(&v4, &id);
  CHECK_EQ(ccoUniqueIdGetRootAddress(NULL, text, sizeof(text)), ccoInvalidArgument);
  CHECK_EQ(ccoUniqueIdGetRootAddress(&id, NULL, sizeof(text)), ccoInvalidArgument);
  CHECK_EQ(ccoUniqueIdGetRootAddress(&id, text, CCO_UNIQUE_ID_ADDRESS_STRING_BYTES - 1), ccoInvalidArgument);
  CHECK(strstr(ccoGetLastError(NULL), "too small") != NULL);
  id.internal[0] = 'X'; /* bad magic */
  CHECK_EQ(ccoUniqueIdGetRootAddress(&id, text, sizeof(text)), ccoInvalidArgument);
  CHECK(strstr(ccoGetLastError(NULL), "not a valid cco unique id") != NULL);
  CHECK_STR(text, "untouched");
}

TEST(decode_errors) {
  cco_id_info info = info_v4("10.0.0.1", 1234);
  ccoUniqueId id;
  cco_id_info back;

  cco_uniqueid_encode(&info, &id);
  id.internal[3] = 'X';
  memset(&back, 0x77, sizeof(back));
  CHECK_EQ(cco_uniqueid_decode(&id, &back), CCO_WIRE_EMAGIC);
  CHECK_EQ(back.secret[0], 0x77); /* untouched */

  cco_uniqueid_encode(&info, &id);
  id.internal[4] = (char)(CCO_WIRE_VERSION + 1);
  CHECK_EQ(cco_uniqueid_decode(&id, &back), CCO_WIRE_EVERSION);

  cco_uniqueid_encode(&info, &id);
  id.internal[6] = 0;
  CHECK_EQ(cco_uniqueid_decode(&id, &back), CCO_WIRE_EVALUE);

  cco_uniqueid_encode(&info, &id);
  id.internal[8] = 0;
  id.internal[9] = 0;
  memset(&back, 0x77, sizeof(back));
  CHECK_EQ(cco_uniqueid_decode(&id, &back), CCO_WIRE_EVALUE);
  CHECK_EQ(back.secret[0], 0x77);

  ccoUniqueId zero;
  memset(&zero, 0, sizeof(zero));
  CHECK_EQ(cco_uniqueid_decode(&zero, &back), CCO_WIRE_EMAGIC);
}

/* Bytes 10-11 and 48-127 are reserved and zero: an id that uses them (a
 * newer format, another program's bytes, a damaged copy) is refused by the
 * decoder, by the text parser and by ccoCommCreate, whichever byte it is. */
TEST(reserved_bytes_refused) {
  cco_id_info info = info_v4("127.0.0.1", 4321);
  int offsets[2 + (CCO_UNIQUE_ID_BYTES - 48)];
  int n = 0;
  offsets[n++] = 10;
  offsets[n++] = 11;
  for (int i = 48; i < CCO_UNIQUE_ID_BYTES; i++) offsets[n++] = i;
  for (int j = 0; j < n; j++) {
    const uint8_t values[] = {1, 0x80, 0xFF};
    for (size_t v = 0; v < sizeof(values); v++) {
      ccoUniqueId id;
      cco_uniqueid_encode(&info, &id);
      id.internal[offsets[j]] = (char)values[v];
      cco_id_info back;
      memset(&back, 0x77, sizeof(back));
      CHECK_EQ(cco_uniqueid_decode(&id, &back), CCO_WIRE_ERESERVED);
      CHECK_EQ(back.secret[0], 0x77); /* untouched */
      char text[CCO_UNIQUE_ID_STRING_BYTES];
      to_text(&id, text);
      expect_rejected(text, "reserved");
    }
  }
  /* ccoCommCreate refuses such an id before it opens anything. */
  ccoUniqueId id;
  cco_uniqueid_encode(&info, &id);
  id.internal[CCO_UNIQUE_ID_BYTES - 1] = 1;
  ccoComm* comm = (ccoComm*)&id;
  CHECK_EQ(ccoCommCreate(id, 1, 0, 0, &comm), ccoInvalidArgument);
  CHECK(comm == (ccoComm*)&id); /* output untouched */
  CHECK(strstr(ccoGetLastError(NULL), "reserved") != NULL);
  /* Zero reserved bytes: the same id decodes. */
  id.internal[CCO_UNIQUE_ID_BYTES - 1] = 0;
  cco_id_info back;
  CHECK_EQ(cco_uniqueid_decode(&id, &back), CCO_WIRE_OK);
}

/* ------------------------------------------------------------------------ */
/* Last error                                                               */
/* ------------------------------------------------------------------------ */

TEST(last_error_after_failure) {
  /* Each failure replaces the detail of the one before. */
  CHECK_EQ(ccoUniqueIdFromString("zz", NULL), ccoInvalidArgument);
  ccoUniqueId out;
  CHECK_EQ(ccoUniqueIdFromString("not hex at all", &out), ccoInvalidArgument);
  const char* e1 = ccoGetLastError(NULL);
  CHECK(e1 != NULL && e1[0] != '\0');
  CHECK(strstr(e1, "14 characters") != NULL);

  char text[CCO_UNIQUE_ID_STRING_BYTES];
  memset(text, 'a', sizeof(text) - 1);
  text[sizeof(text) - 1] = '\0';
  CHECK_EQ(ccoUniqueIdFromString(text, &out), ccoInvalidArgument); /* magic "\xaa..." */
  const char* e2 = ccoGetLastError(NULL);
  CHECK(strstr(e2, "magic") != NULL);
  CHECK(strstr(e2, "14 characters") == NULL);

  text[17] = 'k';
  CHECK_EQ(ccoUniqueIdFromString(text, &out), ccoInvalidArgument);
  CHECK(strstr(ccoGetLastError(NULL), "position 17") != NULL);
  text[17] = 'a';
  text[16] = 'k';
  CHECK_EQ(ccoUniqueIdFromString(text, &out), ccoInvalidArgument);
  CHECK(strstr(ccoGetLastError(NULL), "position 16") != NULL);
}

int main(void) { return RUN_TESTS(); }
