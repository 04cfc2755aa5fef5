// The traffic counter of traffic.h: the runtime's hooks (allocations, copies, launches,
// blocks) and GCC's ThreadSanitizer instrumentation callbacks, which the counting flavour of
// the emulated kernels calls on every load and store. Accesses outside device allocations
// (stack, shared memory, host tables) are ignored.
#include "kernels/cuda/emu/traffic.h"

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>

#include "kernels/cuda/emu/emu.h"

namespace ember::emu {
namespace {

constexpr uintptr_t kSector = 32;

struct Alloc {
    uintptr_t start = 0;
    size_t size = 0;
    bool uploaded = false;                         // filled by a host-to-device copy
    bool written = false;                          // written by a kernel or a device-to-device copy
    std::vector<uint64_t> sector_bits, byte_bits;  // this launch's touches
    uint64_t new_bytes = 0;                        // distinct bytes touched this launch
    bool touched = false;
};

// One warp-instruction: the (warp, load/store site, k-th execution of that site by each lane)
// key and its lanes' accesses (one per lane at most).
struct Group {
    uint64_t key;
    uint32_t n = 0, slot = 0;  // lanes recorded; its slot in the lookup table
    uintptr_t addr[32];
    uint32_t size[32];
};
constexpr int kSiteBits = 10, kCountBits = 40;  // and 5 bits of warp: <= 1024 threads

// Sets bits [lo, hi) of `bits`; returns how many were clear.
uint64_t set_bits(std::vector<uint64_t>& bits, uint64_t lo, uint64_t hi) {
    uint64_t fresh = 0;
    for (uint64_t i = lo; i < hi; ++i) {
        uint64_t& w = bits[i >> 6];
        const uint64_t m = uint64_t{1} << (i & 63);
        fresh += (w & m) == 0;
        w |= m;
    }
    return fresh;
}

class Counter final : public TrafficHooks {
public:
    void launch_begin(const char* name, const void* id, dim3 grid, dim3 block, size_t smem) override {
        cur_ = LaunchTraffic{};
        cur_.kernel = name;
        cur_.grid = grid;
        cur_.block = block;
        cur_.smem = smem;
        Dl_info info{};
        if (dladdr(id, &info) && info.dli_fbase) {
            cur_.kernel_offset = reinterpret_cast<uintptr_t>(id) - reinterpret_cast<uintptr_t>(info.dli_fbase);
            cur_.kernel_object = info.dli_fname ? info.dli_fname : "";
        }
        sites_.clear();
        site_cache_.fill(SiteSlot{});
        in_launch_ = true;
    }

    void block_end() override {
        for (size_t i = 0; i < n_groups_; ++i) {
            add_group(groups_[i]);
            table_[groups_[i].slot] = kEmpty;
        }
        n_groups_ = 0;
        std::fill(counts_.begin(), counts_.begin() + std::min(counts_.size(), size_t{used_threads_} * kMaxSites), 0);
        used_threads_ = 0;
    }

    void launch_end() override {
        in_launch_ = false;
        uint64_t sectors = 0;
        for (Alloc* a : touched_) {
            for (uint64_t w : a->sector_bits) sectors += static_cast<uint64_t>(__builtin_popcountll(w));
            cur_.floor_bytes += a->new_bytes;
            if (a->uploaded && !a->written) cur_.uploaded_bytes += a->new_bytes;
            std::fill(a->sector_bits.begin(), a->sector_bits.end(), 0);
            std::fill(a->byte_bits.begin(), a->byte_bits.end(), 0);
            a->new_bytes = 0;
            a->touched = false;
        }
        touched_.clear();
        cur_.dram_bytes = sectors * kSector;
        for (uintptr_t pc : weight_pcs_) {
            Dl_info info{};
            if (dladdr(reinterpret_cast<void*>(pc), &info) && info.dli_fbase)
                cur_.weight_sites.push_back(pc - reinterpret_cast<uintptr_t>(info.dli_fbase));
        }
        weight_pcs_.clear();
        if (counting_) done_.push_back(std::move(cur_));
    }

    void allocated(const void* p, size_t bytes) override {
        Alloc& a = allocs_[reinterpret_cast<uintptr_t>(p)];
        a = Alloc{};
        a.start = reinterpret_cast<uintptr_t>(p);
        a.size = bytes;
        last_ = nullptr;
    }
    void freed(const void* p) override {
        allocs_.erase(reinterpret_cast<uintptr_t>(p));
        last_ = nullptr;
    }
    void copied_to(const void* p, size_t, bool from_host) override {
        if (Alloc* a = find(reinterpret_cast<uintptr_t>(p))) (from_host ? a->uploaded : a->written) = true;
    }

    void access(const void* p, size_t size, bool write, uintptr_t pc) {
        if (!in_launch_ || size == 0) return;
        const auto addr = reinterpret_cast<uintptr_t>(p);
        Alloc* a = find(addr);
        if (!a) return;
        mark(*a, addr, size);
        if (write) {
            a->written = true;
            cur_.written_bytes += size;
        } else if (a->uploaded && !a->written && weight_pcs_.size() < kMaxSites) {
            if (std::find(weight_pcs_.begin(), weight_pcs_.end(), pc) == weight_pcs_.end()) weight_pcs_.push_back(pc);
        }
        const uint32_t tid = g_thread_idx.x + g_block_dim.x * (g_thread_idx.y + g_block_dim.y * g_thread_idx.z);
        const uint32_t site = site_of(pc);
        const size_t slot = static_cast<size_t>(tid) * kMaxSites + site;
        if (slot >= counts_.size()) counts_.resize(slot + 1, 0);
        const uint64_t k = counts_[slot]++;
        used_threads_ = std::max(used_threads_, tid + 1);
        Group& g = group(uint64_t{tid / 32} << (kSiteBits + kCountBits) | uint64_t{site} << kCountBits | k);
        if (g.n == 32) throw KernelFault("ember CUDA emulator: a warp-instruction with more than 32 accesses");
        g.addr[g.n] = addr;
        g.size[g.n++] = static_cast<uint32_t>(size);
    }

    void set_counting(bool on) { counting_ = on; }
    std::vector<LaunchTraffic> take() { return std::exchange(done_, {}); }

private:
    Alloc* find(uintptr_t addr) {
        if (last_ && addr - last_->start < last_->size) return last_;
        auto it = allocs_.upper_bound(addr);
        if (it == allocs_.begin()) return nullptr;
        --it;
        if (addr - it->second.start >= it->second.size) return nullptr;
        return last_ = &it->second;
    }

    static uint64_t mix(uint64_t x) {  // splitmix64's finalizer: every key bit moves the low bits
        x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
        x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
        return x ^ (x >> 31);
    }
    Group& group(uint64_t key) {
        if (2 * (n_groups_ + 1) > table_.size()) grow_table();
        const size_t mask = table_.size() - 1;
        for (size_t h = mix(key) & mask;; h = (h + 1) & mask) {
            if (table_[h] == kEmpty) {
                if (n_groups_ == groups_.size()) groups_.emplace_back();
                Group& g = groups_[n_groups_];
                g.key = key;
                g.n = 0;
                g.slot = static_cast<uint32_t>(h);
                table_[h] = static_cast<uint32_t>(n_groups_++);
                return g;
            }
            if (groups_[table_[h]].key == key) return groups_[table_[h]];
        }
    }
    void grow_table() {
        table_.assign(table_.size() * 2, kEmpty);
        const size_t mask = table_.size() - 1;
        for (size_t i = 0; i < n_groups_; ++i) {
            size_t h = mix(groups_[i].key) & mask;
            while (table_[h] != kEmpty) h = (h + 1) & mask;
            table_[h] = static_cast<uint32_t>(i);
            groups_[i].slot = static_cast<uint32_t>(h);
        }
    }

    // A load/store site's index (sites are few: a direct-mapped cache in front of a list).
    uint32_t site_of(uintptr_t pc) {
        SiteSlot& c = site_cache_[(pc >> 2) % site_cache_.size()];
        if (c.pc == pc) return c.index;
        auto it = std::find(sites_.begin(), sites_.end(), pc);
        if (it == sites_.end()) {
            if (sites_.size() >= kMaxSites)
                throw KernelFault("ember CUDA emulator: too many load/store sites to count");
            sites_.push_back(pc);
            it = sites_.end() - 1;
        }
        c = SiteSlot{pc, static_cast<uint32_t>(it - sites_.begin())};
        return c.index;
    }

    void mark(Alloc& a, uintptr_t addr, size_t size) {
        if (!a.touched) {
            a.touched = true;
            touched_.push_back(&a);
            a.sector_bits.resize((a.size + kSector - 1) / kSector / 64 + 1);
            a.byte_bits.resize(a.size / 64 + 1);
        }
        const uint64_t off = addr - a.start, end = std::min<uint64_t>(off + size, a.size);
        set_bits(a.sector_bits, off / kSector, (end + kSector - 1) / kSector);
        a.new_bytes += set_bits(a.byte_bits, off, end);
    }

    // One warp-instruction: its distinct sectors against the fewest that hold its bytes.
    void add_group(Group& g) {
        // Sorted by address (insertion sort: at most 32 lanes, mostly in order already).
        for (uint32_t i = 1; i < g.n; ++i)
            for (uint32_t j = i; j > 0 && g.addr[j] < g.addr[j - 1]; --j) {
                std::swap(g.addr[j], g.addr[j - 1]);
                std::swap(g.size[j], g.size[j - 1]);
            }
        uint64_t bytes = 0, sectors = 0, requested = 0;
        uintptr_t covered = 0, last_sector = ~uintptr_t{0};
        for (uint32_t i = 0; i < g.n; ++i) {
            const uintptr_t a = g.addr[i], end = a + g.size[i];
            requested += g.size[i];
            if (end > covered) bytes += end - std::max(covered, a);
            covered = std::max(covered, end);
            for (uintptr_t s = a / kSector; s <= (end - 1) / kSector; ++s) {
                // Sorted by start: a sector at or below the highest one counted is counted.
                if (last_sector == ~uintptr_t{0} || s > last_sector) {
                    ++sectors;
                    last_sector = s;
                }
            }
        }
        ++cur_.requests;
        cur_.bytes_requested += requested;
        cur_.sectors += sectors;
        cur_.ideal_sectors += (bytes + kSector - 1) / kSector;
    }

    std::map<uintptr_t, Alloc> allocs_;
    Alloc* last_ = nullptr;
    std::vector<Alloc*> touched_;
    static constexpr size_t kMaxSites = 1u << kSiteBits;
    struct SiteSlot {
        uintptr_t pc = 0;
        uint32_t index = 0;
    };
    std::vector<uintptr_t> sites_;       // the instrumented sites this launch executed
    std::vector<uintptr_t> weight_pcs_;  // those that read uploaded, never written memory
    std::array<SiteSlot, 512> site_cache_{};
    std::vector<uint64_t> counts_;  // [thread * kMaxSites + site]: executions so far in this block
    uint32_t used_threads_ = 0;
    // This block's warp-instructions: groups_[0, n_groups_), found by key through table_
    // (open addressing; slots hold group indices, kEmpty when free).
    static constexpr uint32_t kEmpty = ~0u;
    std::vector<Group> groups_;
    size_t n_groups_ = 0;
    std::vector<uint32_t> table_ = std::vector<uint32_t>(1 << 12, kEmpty);
    LaunchTraffic cur_;
    std::vector<LaunchTraffic> done_;
    bool in_launch_ = false, counting_ = false;
};

Counter& counter() {
    static Counter c;
    return c;
}

}  // namespace

void set_traffic_counting(bool on) {
    counter().set_counting(on);
    g_traffic = &counter();
}

std::vector<LaunchTraffic> take_traffic() { return counter().take(); }

}  // namespace ember::emu

// ---- GCC's -fsanitize=thread callbacks (no TSan runtime is linked) ---------------------------
namespace {
// `pc`: the instrumented load or store (its call site), which identifies the instruction.
inline void on_access(void* p, size_t n, bool write, void* pc) {
    if (ember::emu::g_traffic)
        static_cast<ember::emu::Counter*>(ember::emu::g_traffic)->access(p, n, write, reinterpret_cast<uintptr_t>(pc));
}
}  // namespace

extern "C" {
void __tsan_init() {}
void __tsan_func_entry(void*) {}
void __tsan_func_exit() {}
void __tsan_vptr_update(void**, void*) {}
void __tsan_vptr_read(void**) {}
#define EMBER_TSAN_RW(n)                                                                                            \
    __attribute__((noinline)) void __tsan_read##n(void* p) { on_access(p, n, false, __builtin_return_address(0)); } \
    __attribute__((noinline)) void __tsan_write##n(void* p) { on_access(p, n, true, __builtin_return_address(0)); } \
    __attribute__((noinline)) void __tsan_unaligned_read##n(void* p) {                                              \
        on_access(p, n, false, __builtin_return_address(0));                                                        \
    }                                                                                                               \
    __attribute__((noinline)) void __tsan_unaligned_write##n(void* p) {                                             \
        on_access(p, n, true, __builtin_return_address(0));                                                         \
    }
EMBER_TSAN_RW(1)
EMBER_TSAN_RW(2)
EMBER_TSAN_RW(4)
EMBER_TSAN_RW(8)
EMBER_TSAN_RW(16)
#undef EMBER_TSAN_RW
__attribute__((noinline)) void __tsan_read_range(void* p, size_t n) {
    on_access(p, n, false, __builtin_return_address(0));
}
__attribute__((noinline)) void __tsan_write_range(void* p, size_t n) {
    on_access(p, n, true, __builtin_return_address(0));
}
// Atomics the instrumented code uses (function-local statics' guards): done, not counted.
uint8_t __tsan_atomic8_load(const volatile uint8_t* a, int) { return __atomic_load_n(a, __ATOMIC_SEQ_CST); }
uint64_t __tsan_atomic64_load(const volatile uint64_t* a, int) { return __atomic_load_n(a, __ATOMIC_SEQ_CST); }
void __tsan_atomic64_store(volatile uint64_t* a, uint64_t v, int) { __atomic_store_n(a, v, __ATOMIC_SEQ_CST); }
}
