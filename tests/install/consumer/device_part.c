/* Host C through the device headers (the host platform runs kernel bodies
 * on CPU threads), built with nothing but cco::device's include path. */
#include "cco/cco_device_all.h"
#include "device_part.h"

int consumer_own_world_rank(const ccoDevComm* dc) {
  return ccoDevTeamRankToWorld(dc, ccoTeamLsa, dc->lsaRank);
}
