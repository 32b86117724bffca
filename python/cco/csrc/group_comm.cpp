// One cco communicator per process group, made on the group's first
// rendezvous: group rank 0 mints the unique id and puts it in the group's
// store, the others read it there, and every rank joins. The store only
// bootstraps; cco talks over its own sockets from then on.
#include <torch/csrc/distributed/c10d/GroupRegistry.hpp>
#include <torch/csrc/distributed/c10d/symm_mem/SymmetricMemory.hpp>

#include <cstring>
#include <stdexcept>

#include "cco_symm_mem.h"

namespace cco_torch {

namespace {

struct GroupInfo {
  int rank = -1, size = 0;
  c10::intrusive_ptr<c10d::Store> store;
};

// A process group torch knows by name; else what set_group_info recorded
// (symm_mem.enable_symm_mem_for_group, tests that mock groups).
GroupInfo lookup_group(const std::string& name) {
  try {
    auto pg = c10d::resolve_process_group(name);
    if (pg && pg->getStore()) return {pg->getRank(), pg->getSize(), pg->getStore()};
  } catch (const std::exception&) {
    // not registered under that name: try the symmetric-memory registry
  }
  try {
    auto& info = c10d::symmetric_memory::get_group_info(name);
    return {info.rank, info.world_size, info.store};
  } catch (const std::exception&) {
    throw std::runtime_error("CCO symmetric memory: no process group named '" + name +
                             "' (create it with torch.distributed first)");
  }
}

// This process's rank in the default group, or -1 when torch has none.
int global_rank() {
  try {
    auto pg = c10d::resolve_process_group("0");
    return pg ? pg->getRank() : -1;
  } catch (const std::exception&) {
    return -1;
  }
}

std::mutex g_groups_lock;  // held across creation: one group's collective at a time
// Allocated once and never destroyed, so that process exit, which may run
// static destructors in any order, never destroys a communicator from here.
auto& g_groups = *new std::map<std::pair<std::string, int>, std::shared_ptr<GroupComm>>();
auto& g_generation = *new std::map<std::string, int>();  // ids minted per group, for store keys

ccoUniqueId exchange_id(const GroupInfo& info, const std::string& key) {
  ccoUniqueId id;
  if (info.rank == 0) {
    check_cco(ccoGetUniqueId(&id), nullptr, "a unique id for the group's communicator");
    const auto* bytes = reinterpret_cast<const uint8_t*>(&id);
    info.store->set(key, std::vector<uint8_t>(bytes, bytes + sizeof(id)));
    return id;
  }
  std::vector<uint8_t> got = info.store->get(key);  // waits up to the store's timeout
  if (got.size() != sizeof(id))
    throw std::runtime_error("CCO symmetric memory: store key '" + key + "' holds " +
                             std::to_string(got.size()) + " bytes, not a unique id");
  std::memcpy(&id, got.data(), sizeof(id));
  return id;
}

std::shared_ptr<GroupComm> make_group_comm(const std::string& name, int device,
                                           size_t slot_bytes) {
  GroupInfo info = lookup_group(name);
  auto group = std::make_shared<GroupComm>();
  group->name = name;
  group->rank = info.rank;
  group->world_size = info.size;
  group->device = device;
  std::string key = "cco_symm_mem/unique_id/" + std::to_string(g_generation[name]++);
  ccoUniqueId id = exchange_id(info, key);
  int previous = -1;
  check_cuda(cudaGetDevice(&previous), "cudaGetDevice");
  check_cuda(cudaSetDevice(device), "cudaSetDevice");
  ccoResult_t res = ccoCommCreate(id, info.size, info.rank, slot_bytes, &group->comm);
  cudaSetDevice(previous);
  check_cco(res, nullptr,
            "joining the communicator of group '" + name + "' as rank " +
                std::to_string(info.rank) + " of " + std::to_string(info.size));
  group->global_ranks.assign(info.size, -1);
  int mine = global_rank();
  check_cco(ccoBootstrapAllGather(group->comm, &mine, group->global_ranks.data(), sizeof(int)),
            group->comm, "exchanging global ranks");
  return group;
}

}  // namespace

GroupComm::~GroupComm() {
  if (!exiting()) destroy();
}

void GroupComm::destroy() {
  std::lock_guard<std::mutex> guard(lock);
  if (comm) ccoCommDestroy(comm);
  comm = nullptr;
}

std::shared_ptr<GroupComm> group_comm_for(const std::string& group_name, int device,
                                          size_t slot_bytes) {
  std::lock_guard<std::mutex> guard(g_groups_lock);
  auto key = std::make_pair(group_name, device);
  auto it = g_groups.find(key);
  if (it != g_groups.end()) return it->second;
  auto group = make_group_comm(group_name, device, slot_bytes);
  g_groups.emplace(key, group);
  return group;
}

void destroy_group_comms() {
  std::lock_guard<std::mutex> guard(g_groups_lock);
  for (auto& entry : g_groups) entry.second->destroy();
  g_groups.clear();
}

}  // namespace cco_torch
