/* cco-info: version, platforms found, and (-e) the environment table. */
#include <stdio.h>
#include <string.h>

#include "cco/cco.h"
#include "base/env.h"
#include "platform/platform.h"

static void usage(FILE* out) {
  fprintf(out,
          "usage: cco-info [-e] [-h]\n"
          "  prints the cco version and the platforms found\n"
          "  -e  also print every environment variable cco reads, its value and help\n");
}

static const char* type_name(cco_env_type t) {
  switch (t) {
    case CCO_ENV_STR: return "string";
    case CCO_ENV_BOOL: return "bool";
    case CCO_ENV_INT: return "int";
    case CCO_ENV_DOUBLE: return "number";
    case CCO_ENV_ENUM: return "enum";
  }
  return "?";
}

/* Shown for a variable set to the empty string, so that it reads as a value. */
static const char* shown(const char* value) { return value[0] ? value : "\"\""; }

/* One line per variable with its help below it. The name and value columns
 * are as wide as their widest entry, so the sources line up whatever the
 * values are. */
static void print_env(void) {
  int nameWidth = 0, valueWidth = 0;
  for (int id = 0; id < CCO_ENV_COUNT; id++) {
    const char* source = NULL;
    int n = (int)strlen(cco_env_describe((cco_env_id)id)->name);
    int v = (int)strlen(shown(cco_env_text((cco_env_id)id, &source)));
    if (n > nameWidth) nameWidth = n;
    if (v > valueWidth) valueWidth = v;
  }
  printf("\nenvironment (value in force, and where it came from):\n");
  for (int id = 0; id < CCO_ENV_COUNT; id++) {
    const cco_env_desc* d = cco_env_describe((cco_env_id)id);
    const char* source = NULL;
    const char* value = shown(cco_env_text((cco_env_id)id, &source));
    printf("  %-*s = %-*s [%s%s%s]\n", nameWidth, d->name, valueWidth, value, source,
           d->alias ? ", alias " : "", d->alias ? d->alias : "");
    printf("      %s %s%s%s: %s\n", d->subsys, type_name(d->type), d->choices ? " " : "",
           d->choices ? d->choices : "", d->help);
  }
}

int main(int argc, char** argv) {
  int showEnv = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-e")) showEnv = 1;
    else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      usage(stdout);
      return 0;
    } else {
      usage(stderr);
      return 2;
    }
  }
  int version = 0;
  ccoGetVersion(&version);
  printf("cco %d.%d.%d (version code %d)\n", version / 10000, (version / 100) % 100,
         version % 100, version);
  cco_cuda_probe_result cuda;
  cco_cuda_probe(&cuda);
  printf("platforms:\n");
  printf("  host: available (CPU memory, memfd + mmap)\n");
  printf("  cuda: %s (%s)\n", cuda.available ? "available" : "not available", cuda.detail);
  const char* source = NULL;
  printf("platform in use with CCO_PLATFORM=%s: %s\n",
         cco_env_text(CCO_ENV_ID_CCO_PLATFORM, &source),
         cco_env_enum(CCO_ENV_ID_CCO_PLATFORM) == 1   ? "cuda"
         : cco_env_enum(CCO_ENV_ID_CCO_PLATFORM) == 2 ? "host"
         : cuda.available                             ? "cuda"
                                                      : "host");
  const char* detail = NULL;
  int bad = cco_env_status(&detail) != ccoSuccess;
  if (bad) printf("environment error: %s\n", detail);
  if (showEnv) print_env();
  return bad ? 1 : 0;
}
