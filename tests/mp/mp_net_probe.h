/* Whether the network engine opens here (libfabric present, the provider
 * usable), tried in a child so the calling process never loads libfabric
 * before it forks its ranks. On failure the child prints "<why>: <detail>". */
#ifndef CCO_MP_NET_PROBE_H_
#define CCO_MP_NET_PROBE_H_

#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cco/cco.h"
#include "transport/net/net.h"

static inline int mp_net_opens_in_child(const char* why) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    cco_net_config cfg;
    cco_net_config_from_env(&cfg);
    cco_net* net = NULL;
    if (cco_net_open(&cfg, &net) != ccoSuccess) {
      printf("%s: %s\n", why, ccoGetLastError(NULL));
      fflush(stdout);
      _exit(77);
    }
    cco_net_close(net);
    _exit(0);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

#endif
