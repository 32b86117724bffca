/* Unique id: its bytes, minting, and its hex text form. */
#include <ctype.h>
#include <stdio.h>
#include <unistd.h>
#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include "boot/uniqueid.h"

#include "base/env.h"
#include "base/error.h"
#include "boot/socket.h"

static const uint8_t g_id_magic[4] = {'C', 'C', 'O', 'I'};

/* ---------------------------------------------------------------- ids --- */

void cco_uniqueid_encode(const cco_id_info* info, ccoUniqueId* id) {
  uint8_t* p = (uint8_t*)id->internal;
  uint8_t addr[CCO_WIRE_ADDR_BYTES];
  memset(id, 0, sizeof(*id));
  memcpy(p, g_id_magic, 4);
  cco_wire_put_u16(p + 4, CCO_WIRE_VERSION);
  cco_wire_encode_addr(&info->root, addr); /* family, port, addr, scope */
  memcpy(p + 6, addr, 4);                  /* family u16, port u16 */
  memcpy(p + 12, addr + 4, 20);            /* addr[16], scope u32 */
  memcpy(p + 32, info->secret, CCO_WIRE_SECRET_BYTES);
}

int cco_uniqueid_decode(const ccoUniqueId* id, cco_id_info* info) {
  const uint8_t* p = (const uint8_t*)id->internal;
  if (memcmp(p, g_id_magic, 4) != 0) return CCO_WIRE_EMAGIC;
  if (cco_wire_get_u16(p + 4) != CCO_WIRE_VERSION) return CCO_WIRE_EVERSION;
  /* Bytes 10-11 and 48-127 are reserved: an id that uses them comes from a
   * newer or different format (or is damaged), and is refused. */
  uint8_t reserved = (uint8_t)(p[10] | p[11]);
  for (int i = 48; i < CCO_UNIQUE_ID_BYTES; i++) reserved |= p[i];
  if (reserved) return CCO_WIRE_ERESERVED;
  uint8_t addr[CCO_WIRE_ADDR_BYTES];
  memcpy(addr, p + 6, 4);
  memcpy(addr + 4, p + 12, 20);
  cco_id_info out;
  int err = cco_wire_decode_addr(addr, sizeof(addr), &out.root);
  if (err != CCO_WIRE_OK) return err;
  if (cco_sockaddr_port(&out.root) == 0) return CCO_WIRE_EVALUE;
  memcpy(out.secret, p + 32, CCO_WIRE_SECRET_BYTES);
  *info = out;
  return CCO_WIRE_OK;
}

static ccoResult_t random_bytes(uint8_t* out, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = getrandom(out + got, n - got, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      return cco_error(NULL, ccoSystemError, CCO_SUBSYS_BOOT, "getrandom failed: %s",
                       strerror(errno));
    }
    got += (size_t)r;
  }
  return ccoSuccess;
}

/* The kernel's ephemeral port range (what port-0 binds and connects use). */
static void ephemeral_range(unsigned* lo, unsigned* hi) {
  *lo = 32768;
  *hi = 60999;
  FILE* f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "re");
  if (!f) return;
  unsigned a, b;
  if (fscanf(f, "%u %u", &a, &b) == 2 && a <= b && b <= 65535) *lo = a, *hi = b;
  fclose(f);
}

/* The root's port stays free from ccoGetUniqueId until rank 0 binds it, so
 * it is drawn outside the ephemeral range: no port-0 bind or outgoing
 * connection of this machine (other communicators' links included) can
 * take it in between. It is checked free by binding it once. */
static ccoResult_t pick_root_port(cco_sockaddr* root) {
  unsigned lo, hi;
  ephemeral_range(&lo, &hi);
  const unsigned floor = 10000; /* stay clear of well-known service ports */
  unsigned below = lo > floor ? lo - floor : 0, above = 65535 - hi;
  for (int attempt = 0; attempt < 64 && below + above > 0; attempt++) {
    uint32_t r;
    CCO_CHECK(random_bytes((uint8_t*)&r, sizeof(r)));
    unsigned pick = r % (below + above);
    unsigned port = pick < below ? floor + pick : hi + 1 + (pick - below);
    int fd = socket(cco_sockaddr_family(root), SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) break;
    cco_sockaddr_set_port(root, (uint16_t)port);
    int ok = bind(fd, (const struct sockaddr*)&root->ss, cco_sockaddr_len(root)) == 0;
    close(fd);
    if (ok) return ccoSuccess;
  }
  /* Unusual port layout: fall back to a kernel-chosen port. */
  int fd = -1;
  cco_sockaddr_set_port(root, 0);
  CCO_CHECK(cco_socket_listen(root, false, &fd, root));
  cco_socket_close(&fd);
  return ccoSuccess;
}

ccoResult_t ccoGetUniqueId(ccoUniqueId* id) {
  if (!id) return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_BOOT, "id is NULL");
  const char* detail = NULL;
  if (cco_env_status(&detail) != ccoSuccess)
    return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_ENV, "%s", detail);
  static const int families[] = {AF_UNSPEC, AF_INET, AF_INET6}; /* CCO_SOCKET_FAMILY order */
  int family = families[cco_env_enum(CCO_ENV_ID_CCO_SOCKET_FAMILY)];
  cco_id_info info;
  memset(&info, 0, sizeof(info));
  char ifname[64] = "";
  CCO_CHECK(cco_socket_pick_address(cco_env_str(CCO_ENV_ID_CCO_SOCKET_IFNAME), family, &info.root,
                                    ifname, sizeof(ifname)));
  CCO_CHECK(random_bytes(info.secret, sizeof(info.secret)));
  CCO_CHECK(pick_root_port(&info.root));
  cco_uniqueid_encode(&info, id);
  char buf[96];
  CCO_INFO(BOOT, "unique id: root %s on %s", cco_sockaddr_str(&info.root, buf, sizeof(buf)), ifname);
  return ccoSuccess;
}

ccoResult_t ccoUniqueIdToString(const ccoUniqueId* id, char* str, size_t strSize) {
  static const char hex[] = "0123456789abcdef";
  if (!id || !str)
    return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_BOOT, "id or str is NULL");
  if (strSize < CCO_UNIQUE_ID_STRING_BYTES)
    return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_BOOT,
                     "string buffer of %zu bytes is too small (need %d)", strSize,
                     CCO_UNIQUE_ID_STRING_BYTES);
  const uint8_t* p = (const uint8_t*)id->internal;
  for (int i = 0; i < CCO_UNIQUE_ID_BYTES; i++) {
    str[2 * i] = hex[p[i] >> 4];
    str[2 * i + 1] = hex[p[i] & 15];
  }
  str[2 * CCO_UNIQUE_ID_BYTES] = '\0';
  return ccoSuccess;
}

ccoResult_t ccoUniqueIdGetRootAddress(const ccoUniqueId* id, char* str, size_t strSize) {
  if (!id || !str)
    return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_BOOT, "id or str is NULL");
  if (strSize < CCO_UNIQUE_ID_ADDRESS_STRING_BYTES)
    return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_BOOT,
                     "string buffer of %zu bytes is too small (need %d)", strSize,
                     CCO_UNIQUE_ID_ADDRESS_STRING_BYTES);
  cco_id_info info;
  int err = cco_uniqueid_decode(id, &info);
  if (err != CCO_WIRE_OK)
    return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_BOOT, "not a valid cco unique id: %s",
                     cco_wire_strerror(err));
  cco_sockaddr_str(&info.root, str, strSize);
  return ccoSuccess;
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

ccoResult_t ccoUniqueIdFromString(const char* str, ccoUniqueId* id) {
  if (!str || !id)
    return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_BOOT, "str or id is NULL");
  while (isspace((unsigned char)*str)) str++;
  size_t len = strlen(str);
  while (len > 0 && isspace((unsigned char)str[len - 1])) len--;
  if (len != 2 * CCO_UNIQUE_ID_BYTES)
    return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_BOOT,
                     "unique id text has %zu characters, expected %d hex digits", len,
                     2 * CCO_UNIQUE_ID_BYTES);
  ccoUniqueId out;
  for (int i = 0; i < CCO_UNIQUE_ID_BYTES; i++) {
    int hi = hex_value(str[2 * i]), lo = hex_value(str[2 * i + 1]);
    if (hi < 0 || lo < 0)
      return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_BOOT,
                       "unique id text has a non-hex character at position %d", hi < 0 ? 2 * i : 2 * i + 1);
    out.internal[i] = (char)((hi << 4) | lo);
  }
  cco_id_info info;
  int err = cco_uniqueid_decode(&out, &info);
  if (err != CCO_WIRE_OK)
    return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_BOOT, "not a valid cco unique id: %s",
                     cco_wire_strerror(err));
  *id = out;
  return ccoSuccess;
}
