/*
 * The unique id: what it carries (the root's address and the job's secret),
 * its 128 bytes, its text form (ccoUniqueIdToString), and minting
 * (ccoGetUniqueId, which also binds the root's listening port). All of it is
 * in src/boot/uniqueid.c; docs/bootstrap.md describes the format.
 */
#ifndef CCO_BOOT_UNIQUEID_H_
#define CCO_BOOT_UNIQUEID_H_

#include <stdint.h>

#include "boot/socket.h"
#include "boot/wire.h"
#include "cco/cco.h"

/* What the unique id carries. */
typedef struct {
  cco_sockaddr root;
  uint8_t secret[CCO_WIRE_SECRET_BYTES];
} cco_id_info;

/* Id layout: magic "CCOI", version u16, family u16 (4|6), port u16, 2 bytes
 * zero, addr[16], scope u32, secret[16], reserved (zero). Decoding refuses
 * an id whose reserved bytes are not zero (CCO_WIRE_ERESERVED). */
void cco_uniqueid_encode(const cco_id_info* info, ccoUniqueId* id);
int cco_uniqueid_decode(const ccoUniqueId* id, cco_id_info* info); /* CCO_WIRE_* */

#endif /* CCO_BOOT_UNIQUEID_H_ */
