/* Unit tests for src/base/env.c, cco_log_parse_subsys and cco_ifname_matches. */
#include "base/env.h"

#include <math.h>
#include <string.h>

#include "base/log.h"
#include "boot/socket.h"
#include "test.h"

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */
/* ------------------------------------------------------------------------ */

static const cco_env_desc* D(cco_env_id id) {
  const cco_env_desc* d = cco_env_describe(id);
  if (!d) abort();
  return d;
}

/* Parses `text` as variable `id`; returns the parser's result. */
static int parse(cco_env_id id, const char* text, cco_env_value* v, char* err, size_t errSize) {
  err[0] = '\0';
  return cco_env_parse(D(id), text, v, err, errSize);
}

static void expect_bool(const char* text, bool want) {
  cco_env_value v;
  char err[256];
  int r = parse(CCO_ENV_ID_CCO_IGNORE_CPU_AFFINITY, text, &v, err, sizeof(err));
  if (r != 0 || v.b != want) fprintf(stderr, "  bool '%s': r=%d b=%d err='%s'\n", text, r, v.b, err);
  CHECK_EQ(r, 0);
  CHECK_EQ(v.b, want);
}

static void expect_int(const char* text, int64_t want) {
  cco_env_value v;
  char err[256];
  int r = parse(CCO_ENV_ID_CCO_NRANKS, text, &v, err, sizeof(err));
  if (r != 0 || v.i != want) fprintf(stderr, "  int '%s': r=%d err='%s'\n", text, r, err);
  CHECK_EQ(r, 0);
  CHECK_EQ(v.i, want);
}

static void expect_double(const char* text, double want) {
  cco_env_value v;
  char err[256];
  int r = parse(CCO_ENV_ID_CCO_BOOTSTRAP_TIMEOUT, text, &v, err, sizeof(err));
  if (r != 0 || v.d != want) fprintf(stderr, "  double '%s': r=%d err='%s'\n", text, r, err);
  CHECK_EQ(r, 0);
  CHECK(v.d == want);
}

/* The parser refuses `text` and names the variable and the value. */
static void expect_bad(cco_env_id id, const char* text) {
  cco_env_value v;
  char err[256];
  int r = parse(id, text, &v, err, sizeof(err));
  if (r != -1) fprintf(stderr, "  %s='%s' was accepted\n", D(id)->name, text);
  CHECK_EQ(r, -1);
  CHECK(strstr(err, D(id)->name) != NULL);
  char quoted[128];
  snprintf(quoted, sizeof(quoted), "'%s'", text);
  CHECK(strstr(err, quoted) != NULL);
}

/* A fake environment: name=value pairs. */
typedef struct {
  const char* name;
  const char* value;
} kv;
typedef struct {
  const kv* items;
  int n;
  int calls;
} fake_env;

static const char* fake_lookup(const char* name, void* arg) {
  fake_env* e = arg;
  e->calls++;
  for (int i = 0; i < e->n; i++)
    if (!strcmp(e->items[i].name, name)) return e->items[i].value;
  return NULL;
}

#define RELOAD(...)                                                   \
  do {                                                                \
    static const kv items_[] = {__VA_ARGS__};                         \
    fake_env env_ = {items_, (int)(sizeof(items_) / sizeof(kv)), 0};  \
    cco_env_reload_for_test(fake_lookup, &env_);                      \
    CHECK(env_.calls >= CCO_ENV_COUNT);                               \
  } while (0)

static void reload_empty(void) {
  fake_env env = {NULL, 0, 0};
  cco_env_reload_for_test(fake_lookup, &env);
  CHECK(env.calls >= CCO_ENV_COUNT);
}

static void check_source(cco_env_id id, const char* wantText, const char* wantSource) {
  const char* source = NULL;
  const char* text = cco_env_text(id, &source);
  CHECK_STR(text, wantText);
  CHECK_STR(source, wantSource);
}

/* ------------------------------------------------------------------------ */
/* Parser                                                                   */
/* ------------------------------------------------------------------------ */

TEST(parse_bool) {
  const char* yes[] = {"1", "true", "TRUE", "True", "yes", "YES", "Yes", "on", "ON", "oN"};
  const char* no[] = {"0", "false", "FALSE", "False", "no", "NO", "No", "off", "OFF", "oFf", ""};
  for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) expect_bool(yes[i], true);
  for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) expect_bool(no[i], false);
}

TEST(parse_bool_bad) {
  const char* bad[] = {"2", "maybe", "tru", "yess", " 1", "1 ", "-1", "00", "y", "n", "enable"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    expect_bad(CCO_ENV_ID_CCO_IGNORE_CPU_AFFINITY, bad[i]);
  cco_env_value v;
  char err[256];
  CHECK_EQ(parse(CCO_ENV_ID_CCO_CPU_AFFINITY_NO_SPLIT, "sure", &v, err, sizeof(err)), -1);
  CHECK(strstr(err, "CCO_CPU_AFFINITY_NO_SPLIT") != NULL);
  CHECK(strstr(err, "boolean") != NULL);
}

TEST(parse_int) {
  expect_int("0", 0);
  expect_int("42", 42);
  expect_int("-1", -1);
  expect_int("-123456", -123456);
  expect_int("+7", 7);
  expect_int("0x10", 16);
  expect_int("0X1f", 31);
  expect_int("-0x10", -16);
  expect_int("12 ", 12);
  expect_int("12 \t\n", 12);
  expect_int("9223372036854775807", INT64_MAX);
  expect_int("-9223372036854775808", INT64_MIN);
}

TEST(parse_int_bad) {
  const char* bad[] = {"",    "abc",  "12abc", "1.5",  "0x",  "--1", "1 2",
                       "0xg", "1e3",  "9223372036854775808", "-9223372036854775809",
                       "99999999999999999999999"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) expect_bad(CCO_ENV_ID_CCO_NRANKS, bad[i]);
  cco_env_value v;
  char err[256];
  CHECK_EQ(parse(CCO_ENV_ID_CCO_RANK, "x", &v, err, sizeof(err)), -1);
  CHECK(strstr(err, "CCO_RANK=") != NULL);
  CHECK(strstr(err, "integer") != NULL);
}

TEST(parse_double) {
  expect_double("0", 0.0);
  expect_double("0.5", 0.5);
  expect_double("1e3", 1000.0);
  expect_double("120", 120.0);
  expect_double("2.5 ", 2.5);
  expect_double(".25", 0.25);
  expect_double("1E-3", 0.001);
}

TEST(parse_double_bad) {
  const char* bad[] = {"-1", "-0.5", "abc", "inf", "INF", "infinity", "nan", "NaN", "",
                       "1.5x", "1e999", "-inf", "1,5"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    expect_bad(CCO_ENV_ID_CCO_BOOTSTRAP_TIMEOUT, bad[i]);
  cco_env_value v;
  char err[256];
  CHECK_EQ(parse(CCO_ENV_ID_CCO_BOOTSTRAP_TIMEOUT, "-1", &v, err, sizeof(err)), -1);
  CHECK(strstr(err, "non-negative") != NULL);
}

TEST(parse_enum) {
  cco_env_value v;
  char err[256];
  const struct {
    cco_env_id id;
    const char* text;
    int want;
  } cases[] = {
      {CCO_ENV_ID_CCO_SOCKET_FAMILY, "auto", 0}, {CCO_ENV_ID_CCO_SOCKET_FAMILY, "AUTO", 0},
      {CCO_ENV_ID_CCO_SOCKET_FAMILY, "ipv4", 1}, {CCO_ENV_ID_CCO_SOCKET_FAMILY, "IPv4", 1},
      {CCO_ENV_ID_CCO_SOCKET_FAMILY, "ipv6", 2}, {CCO_ENV_ID_CCO_SOCKET_FAMILY, "IPV6", 2},
      {CCO_ENV_ID_CCO_DEBUG, "none", 0},         {CCO_ENV_ID_CCO_DEBUG, "WARN", 1},
      {CCO_ENV_ID_CCO_DEBUG, "Info", 2},         {CCO_ENV_ID_CCO_DEBUG, "trace", 3},
      {CCO_ENV_ID_CCO_PLATFORM, "host", 2},      {CCO_ENV_ID_CCO_PLATFORM, "Cuda", 1},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    v.e = -5;
    int r = parse(cases[i].id, cases[i].text, &v, err, sizeof(err));
    if (r != 0 || v.e != cases[i].want) fprintf(stderr, "  enum '%s'\n", cases[i].text);
    CHECK_EQ(r, 0);
    CHECK_EQ(v.e, cases[i].want);
  }
}

TEST(parse_enum_bad) {
  const char* bad[] = {"ipv5", "", "ipv", "ipv44", "auto,", ",", " auto", "auto ", "4"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    expect_bad(CCO_ENV_ID_CCO_SOCKET_FAMILY, bad[i]);
    cco_env_value v;
    char err[256];
    parse(CCO_ENV_ID_CCO_SOCKET_FAMILY, bad[i], &v, err, sizeof(err));
    CHECK(strstr(err, "auto,ipv4,ipv6") != NULL); /* the error lists the choices */
  }
  cco_env_value v;
  char err[256];
  CHECK_EQ(parse(CCO_ENV_ID_CCO_DEBUG, "LOUD", &v, err, sizeof(err)), -1);
  CHECK(strstr(err, "NONE,WARN,INFO,TRACE") != NULL);
}

TEST(parse_str_accepts_anything) {
  cco_env_value v;
  char err[8] = "";
  CHECK_EQ(parse(CCO_ENV_ID_CCO_SOCKET_IFNAME, "", &v, err, sizeof(err)), 0);
  CHECK_EQ(parse(CCO_ENV_ID_CCO_SOCKET_IFNAME, "^docker,lo", &v, err, sizeof(err)), 0);
  CHECK_EQ(parse(CCO_ENV_ID_CCO_HOSTID, "any \x01 text", &v, err, sizeof(err)), 0);
}

TEST(parse_error_small_buffer) {
  /* The message is truncated to errSize, never overflowing it. */
  cco_env_value v;
  char err[16];
  memset(err, 'X', sizeof(err));
  CHECK_EQ(cco_env_parse(D(CCO_ENV_ID_CCO_SOCKET_FAMILY), "bogus", &v, err, 8), -1);
  CHECK_EQ(strlen(err), 7);
  CHECK_EQ(err[8], 'X');
}

/* ------------------------------------------------------------------------ */
/* Table                                                                    */
/* ------------------------------------------------------------------------ */

TEST(table_defaults_parse) {
  for (int id = 0; id < CCO_ENV_COUNT; id++) {
    const cco_env_desc* d = cco_env_describe((cco_env_id)id);
    CHECK(d != NULL);
    if (!d) continue;
    CHECK(d->name != NULL && strncmp(d->name, "CCO_", 4) == 0);
    CHECK(d->defaultText != NULL);
    CHECK(d->help != NULL && d->help[0] != '\0');
    CHECK(d->subsys != NULL && d->subsys[0] != '\0');
    CHECK((d->type == CCO_ENV_ENUM) == (d->choices != NULL));
    if (d->alias) CHECK(strncmp(d->alias, "MORI_", 5) == 0);
    cco_env_value v;
    char err[256] = "";
    int r = cco_env_parse(d, d->defaultText, &v, err, sizeof(err));
    if (r != 0) fprintf(stderr, "  default of %s: %s\n", d->name, err);
    CHECK_EQ(r, 0);
    /* Names are unique, and no alias shadows a name. */
    for (int j = 0; j < id; j++) {
      const cco_env_desc* o = cco_env_describe((cco_env_id)j);
      CHECK(strcmp(o->name, d->name) != 0);
      if (d->alias) CHECK(strcmp(o->name, d->alias) != 0);
      if (o->alias) CHECK(strcmp(o->alias, d->name) != 0);
    }
  }
  CHECK(cco_env_describe(CCO_ENV_COUNT) == NULL);
  CHECK(cco_env_describe((cco_env_id)-1) == NULL);
  CHECK_STR(D(CCO_ENV_ID_CCO_SOCKET_IFNAME)->alias, "MORI_SOCKET_IFNAME");
  CHECK_STR(D(CCO_ENV_ID_CCO_IGNORE_CPU_AFFINITY)->alias, "MORI_IGNORE_CPU_AFFINITY");
  CHECK_EQ(D(CCO_ENV_ID_CCO_BOOTSTRAP_TIMEOUT)->type, CCO_ENV_DOUBLE);
}

/* ------------------------------------------------------------------------ */
/* Reload through a fake environment                                        */
/* ------------------------------------------------------------------------ */

TEST(reload_canonical_names) {
  RELOAD({"CCO_SOCKET_IFNAME", "eth0"}, {"CCO_BOOTSTRAP_TIMEOUT", "2.5"},
         {"CCO_NRANKS", "8"}, {"CCO_RANK", "0x3"}, {"CCO_SOCKET_FAMILY", "IPv6"},
         {"CCO_IGNORE_CPU_AFFINITY", "yes"}, {"UNRELATED", "1"});
  const char* detail = NULL;
  CHECK_EQ(cco_env_status(&detail), ccoSuccess);
  CHECK(detail != NULL && detail[0] == '\0');
  CHECK_STR(cco_env_str(CCO_ENV_ID_CCO_SOCKET_IFNAME), "eth0");
  CHECK(cco_env_double(CCO_ENV_ID_CCO_BOOTSTRAP_TIMEOUT) == 2.5);
  CHECK_EQ(cco_env_int(CCO_ENV_ID_CCO_NRANKS), 8);
  CHECK_EQ(cco_env_int(CCO_ENV_ID_CCO_RANK), 3);
  CHECK_EQ(cco_env_enum(CCO_ENV_ID_CCO_SOCKET_FAMILY), 2);
  CHECK(cco_env_bool(CCO_ENV_ID_CCO_IGNORE_CPU_AFFINITY));
  check_source(CCO_ENV_ID_CCO_SOCKET_IFNAME, "eth0", "CCO_SOCKET_IFNAME");
  check_source(CCO_ENV_ID_CCO_RANK, "0x3", "CCO_RANK");
  check_source(CCO_ENV_ID_CCO_SOCKET_FAMILY, "IPv6", "CCO_SOCKET_FAMILY");
  /* Unset ones keep their defaults. */
  check_source(CCO_ENV_ID_CCO_LOCAL_RANK, "-1", "default");
  CHECK_EQ(cco_env_int(CCO_ENV_ID_CCO_LOCAL_RANK), -1);
  CHECK(!cco_env_bool(CCO_ENV_ID_CCO_CPU_AFFINITY_NO_SPLIT));
  reload_empty();
}

TEST(reload_aliases) {
  RELOAD({"MORI_SOCKET_IFNAME", "ib"}, {"MORI_IGNORE_CPU_AFFINITY", "1"},
         {"MORI_CPU_AFFINITY_NO_SPLIT", "on"});
  CHECK_EQ(cco_env_status(NULL), ccoSuccess);
  CHECK_STR(cco_env_str(CCO_ENV_ID_CCO_SOCKET_IFNAME), "ib");
  CHECK(cco_env_bool(CCO_ENV_ID_CCO_IGNORE_CPU_AFFINITY));
  CHECK(cco_env_bool(CCO_ENV_ID_CCO_CPU_AFFINITY_NO_SPLIT));
  check_source(CCO_ENV_ID_CCO_SOCKET_IFNAME, "ib", "MORI_SOCKET_IFNAME");
  check_source(CCO_ENV_ID_CCO_IGNORE_CPU_AFFINITY, "1", "MORI_IGNORE_CPU_AFFINITY");
  check_source(CCO_ENV_ID_CCO_CPU_AFFINITY_NO_SPLIT, "on", "MORI_CPU_AFFINITY_NO_SPLIT");
  reload_empty();
}

TEST(reload_canonical_wins_over_alias) {
  RELOAD({"MORI_SOCKET_IFNAME", "ib"}, {"CCO_SOCKET_IFNAME", "eth"},
         {"MORI_IGNORE_CPU_AFFINITY", "1"}, {"CCO_IGNORE_CPU_AFFINITY", "0"});
  CHECK_EQ(cco_env_status(NULL), ccoSuccess);
  check_source(CCO_ENV_ID_CCO_SOCKET_IFNAME, "eth", "CCO_SOCKET_IFNAME");
  check_source(CCO_ENV_ID_CCO_IGNORE_CPU_AFFINITY, "0", "CCO_IGNORE_CPU_AFFINITY");
  CHECK(!cco_env_bool(CCO_ENV_ID_CCO_IGNORE_CPU_AFFINITY));
  /* Set but empty still counts as set for the canonical name. */
  RELOAD({"MORI_SOCKET_IFNAME", "ib"}, {"CCO_SOCKET_IFNAME", ""});
  check_source(CCO_ENV_ID_CCO_SOCKET_IFNAME, "", "CCO_SOCKET_IFNAME");
  reload_empty();
}

TEST(reload_bad_value) {
  RELOAD({"CCO_BOOTSTRAP_TIMEOUT", "abc"}, {"CCO_SOCKET_IFNAME", "eth1"});
  const char* detail = NULL;
  CHECK_EQ(cco_env_status(&detail), ccoInvalidArgument);
  CHECK(detail != NULL && strstr(detail, "CCO_BOOTSTRAP_TIMEOUT") != NULL);
  CHECK(detail != NULL && strstr(detail, "abc") != NULL);
  /* The getter reads the default; good variables still apply. */
  CHECK(cco_env_double(CCO_ENV_ID_CCO_BOOTSTRAP_TIMEOUT) == 120.0);
  check_source(CCO_ENV_ID_CCO_BOOTSTRAP_TIMEOUT, "120", "default");
  CHECK_STR(cco_env_str(CCO_ENV_ID_CCO_SOCKET_IFNAME), "eth1");

  /* Bad enum, int and bool fall back too. */
  RELOAD({"CCO_SOCKET_FAMILY", "ipx"}, {"CCO_NRANKS", "four"}, {"CCO_IGNORE_CPU_AFFINITY", "si"});
  CHECK_EQ(cco_env_status(&detail), ccoInvalidArgument);
  CHECK_EQ(cco_env_enum(CCO_ENV_ID_CCO_SOCKET_FAMILY), 0);
  CHECK_EQ(cco_env_int(CCO_ENV_ID_CCO_NRANKS), -1);
  CHECK(!cco_env_bool(CCO_ENV_ID_CCO_IGNORE_CPU_AFFINITY));
  check_source(CCO_ENV_ID_CCO_NRANKS, "-1", "default");
  /* The first bad variable in table order names the problem. */
  CHECK(strstr(detail, "CCO_SOCKET_FAMILY") != NULL);
  reload_empty();
}

TEST(reload_bad_value_through_alias) {
  RELOAD({"MORI_IGNORE_CPU_AFFINITY", "maybe"});
  const char* detail = NULL;
  CHECK_EQ(cco_env_status(&detail), ccoInvalidArgument);
  CHECK(strstr(detail, "IGNORE_CPU_AFFINITY") != NULL);
  CHECK(strstr(detail, "maybe") != NULL);
  CHECK(strstr(detail, "alias") != NULL);
  CHECK(!cco_env_bool(CCO_ENV_ID_CCO_IGNORE_CPU_AFFINITY));
  check_source(CCO_ENV_ID_CCO_IGNORE_CPU_AFFINITY, "0", "default");
  reload_empty();
}

TEST(reload_empty_restores_defaults) {
  RELOAD({"CCO_DEBUG", "LOUD"}, {"CCO_SOCKET_IFNAME", "eth9"}, {"CCO_RANK", "3"});
  CHECK_EQ(cco_env_status(NULL), ccoInvalidArgument);
  CHECK_STR(cco_env_str(CCO_ENV_ID_CCO_SOCKET_IFNAME), "eth9");
  reload_empty();
  const char* detail = NULL;
  CHECK_EQ(cco_env_status(&detail), ccoSuccess);
  CHECK(detail != NULL && detail[0] == '\0');
  for (int id = 0; id < CCO_ENV_COUNT; id++) {
    const cco_env_desc* d = cco_env_describe((cco_env_id)id);
    const char* source = NULL;
    CHECK_STR(cco_env_text((cco_env_id)id, &source), d->defaultText);
    CHECK_STR(source, "default");
  }
  CHECK_STR(cco_env_str(CCO_ENV_ID_CCO_SOCKET_IFNAME), "");
  CHECK_EQ(cco_env_int(CCO_ENV_ID_CCO_RANK), -1);
  CHECK_EQ(cco_env_enum(CCO_ENV_ID_CCO_DEBUG), 1); /* WARN */
  CHECK(cco_env_double(CCO_ENV_ID_CCO_BOOTSTRAP_TIMEOUT) == 120.0);
  /* Out-of-range ids read as empty / default, never NULL. */
  const char* source = NULL;
  CHECK_STR(cco_env_str(CCO_ENV_COUNT), "");
  CHECK_STR(cco_env_text(CCO_ENV_COUNT, &source), "");
  CHECK_STR(source, "default");
}

/* ------------------------------------------------------------------------ */
/* Log subsystem filter                                                     */
/* ------------------------------------------------------------------------ */

#define ALL_SUBSYS                                                                          \
  (CCO_SUBSYS_INIT | CCO_SUBSYS_BOOT | CCO_SUBSYS_MEM | CCO_SUBSYS_LSA | CCO_SUBSYS_SDMA |   \
   CCO_SUBSYS_GDA | CCO_SUBSYS_PROXY | CCO_SUBSYS_NET | CCO_SUBSYS_ENV | CCO_SUBSYS_AFFINITY |   \
   CCO_SUBSYS_COLL | CCO_SUBSYS_OPS)

TEST(log_parse_subsys) {
  CHECK_EQ(cco_log_parse_subsys(""), ALL_SUBSYS);
  CHECK_EQ(cco_log_parse_subsys(NULL), ALL_SUBSYS);
  CHECK_EQ(cco_log_parse_subsys("BOOT"), CCO_SUBSYS_BOOT);
  CHECK_EQ(cco_log_parse_subsys("BOOT,NET"), CCO_SUBSYS_BOOT | CCO_SUBSYS_NET);
  CHECK_EQ(cco_log_parse_subsys("boot,Net"), CCO_SUBSYS_BOOT | CCO_SUBSYS_NET);
  CHECK_EQ(cco_log_parse_subsys("^BOOT"), ALL_SUBSYS & ~(unsigned)CCO_SUBSYS_BOOT);
  CHECK_EQ(cco_log_parse_subsys("^boot,mem"),
           ALL_SUBSYS & ~(unsigned)(CCO_SUBSYS_BOOT | CCO_SUBSYS_MEM));
  CHECK_EQ(cco_log_parse_subsys("BOOT,FOO"), CCO_SUBSYS_BOOT);
  CHECK_EQ(cco_log_parse_subsys("FOO"), 0);
  CHECK_EQ(cco_log_parse_subsys("^FOO"), ALL_SUBSYS);
  CHECK_EQ(cco_log_parse_subsys("BOOT,,NET,"), CCO_SUBSYS_BOOT | CCO_SUBSYS_NET);
  CHECK_EQ(cco_log_parse_subsys("BOO"), 0); /* names match whole, not by prefix */
  CHECK_EQ(cco_log_parse_subsys("INIT,BOOT,MEM,LSA,SDMA,GDA,PROXY,NET,ENV,AFFINITY,COLL,OPS"), ALL_SUBSYS);
  const struct {
    const char* name;
    unsigned bit;
  } each[] = {{"INIT", CCO_SUBSYS_INIT}, {"BOOT", CCO_SUBSYS_BOOT},   {"MEM", CCO_SUBSYS_MEM},
              {"LSA", CCO_SUBSYS_LSA},   {"SDMA", CCO_SUBSYS_SDMA},   {"GDA", CCO_SUBSYS_GDA},
              {"PROXY", CCO_SUBSYS_PROXY}, {"NET", CCO_SUBSYS_NET}, {"ENV", CCO_SUBSYS_ENV},
              {"AFFINITY", CCO_SUBSYS_AFFINITY}, {"COLL", CCO_SUBSYS_COLL}, {"OPS", CCO_SUBSYS_OPS}};
  for (size_t i = 0; i < sizeof(each) / sizeof(each[0]); i++) {
    CHECK_EQ(cco_log_parse_subsys(each[i].name), each[i].bit);
    char neg[32];
    snprintf(neg, sizeof(neg), "^%s", each[i].name);
    CHECK_EQ(cco_log_parse_subsys(neg), ALL_SUBSYS & ~each[i].bit);
  }
}

/* ------------------------------------------------------------------------ */
/* Interface name filter                                                    */
/* ------------------------------------------------------------------------ */

TEST(ifname_empty_spec) {
  CHECK(cco_ifname_matches("", "eth0"));
  CHECK(cco_ifname_matches("", "lo"));
  CHECK(cco_ifname_matches(NULL, "docker0"));
}

TEST(ifname_prefixes) {
  CHECK(cco_ifname_matches("eth,ib", "eth0"));
  CHECK(cco_ifname_matches("eth,ib", "eth"));
  CHECK(cco_ifname_matches("eth,ib", "ib0"));
  CHECK(cco_ifname_matches("eth,ib", "ibp12s0"));
  CHECK(!cco_ifname_matches("eth,ib", "lo"));
  CHECK(!cco_ifname_matches("eth,ib", "veth0"));
  CHECK(!cco_ifname_matches("eth,ib", "et"));
  CHECK(!cco_ifname_matches("eth,ib", "enp1s0"));
  CHECK(cco_ifname_matches("enp", "enp1s0"));
}

TEST(ifname_exclusion) {
  CHECK(!cco_ifname_matches("^docker,lo", "docker0"));
  CHECK(!cco_ifname_matches("^docker,lo", "lo"));
  CHECK(!cco_ifname_matches("^docker,lo", "lo1"));
  CHECK(cco_ifname_matches("^docker,lo", "eth0"));
  CHECK(cco_ifname_matches("^docker,lo", "ib0"));
  CHECK(cco_ifname_matches("^docker,lo", "dock"));
}

TEST(ifname_exact) {
  CHECK(cco_ifname_matches("=eth0", "eth0"));
  CHECK(!cco_ifname_matches("=eth0", "eth01"));
  CHECK(!cco_ifname_matches("=eth0", "eth"));
  CHECK(!cco_ifname_matches("=eth0", "eth1"));
  CHECK(cco_ifname_matches("=eth0,ib1", "ib1"));
  CHECK(!cco_ifname_matches("=eth0,ib1", "ib10"));
  CHECK(!cco_ifname_matches("^=lo", "lo"));
  CHECK(cco_ifname_matches("^=lo", "lo0"));
  CHECK(cco_ifname_matches("^=lo", "eth0"));
}

TEST(ifname_empty_items) {
  CHECK(cco_ifname_matches("eth,,ib", "eth0"));
  CHECK(cco_ifname_matches("eth,,ib", "ib0"));
  CHECK(!cco_ifname_matches("eth,,ib", "lo")); /* an empty item matches nothing */
  CHECK(cco_ifname_matches("eth,", "eth2"));
  CHECK(!cco_ifname_matches("eth,", "lo"));
  CHECK(cco_ifname_matches(",ib", "ib3"));
  CHECK(!cco_ifname_matches(",", "eth0"));
  CHECK(!cco_ifname_matches("=eth0,,", "eth00"));
  CHECK(cco_ifname_matches("^eth,,ib", "lo"));
  CHECK(!cco_ifname_matches("^eth,,ib", "ib0"));
}

/* Runs last (tests run in file order): back to the process environment. */
TEST(zz_reload_real_environment) {
  reload_empty();
  /* NULL lookup reads the real environment (getenv). */
  const char* saved = getenv("CCO_HOSTID");
  char savedCopy[256] = "";
  if (saved) snprintf(savedCopy, sizeof(savedCopy), "%s", saved);
  CHECK_EQ(setenv("CCO_HOSTID", "unit-test-host", 1), 0);
  cco_env_reload_for_test(NULL, NULL);
  check_source(CCO_ENV_ID_CCO_HOSTID, "unit-test-host", "CCO_HOSTID");
  if (saved) CHECK_EQ(setenv("CCO_HOSTID", savedCopy, 1), 0);
  else CHECK_EQ(unsetenv("CCO_HOSTID"), 0);
  cco_env_reload_for_test(NULL, NULL);
  const char* source = NULL;
  CHECK_STR(cco_env_text(CCO_ENV_ID_CCO_HOSTID, &source), saved ? savedCopy : "");
  CHECK_STR(source, saved ? "CCO_HOSTID" : "default");
}

int main(void) { return RUN_TESTS(); }
