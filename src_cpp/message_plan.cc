// One engine operation per message.  A message of the dist store is a run of segments (a chunk of a key
// each) that travel together; a plan holds each segment's codec (codec.h, made by name from the table
// in codec_table.cc) and offsets, and one call encodes, decodes or copies all of them:
//
//   worker, on MXNet's engine (mxgc_plan_push_encode / mxgc_plan_push_decode): one operation per
//     message, pushed with MXEnginePushSyncND with only the arrays as dependencies, so it needs none
//     of MXNet's temporary-space resources and runs beside backward with MXNet's defaults;
//   server, at once on the caller's thread (mxgc_plan_decode_now / mxgc_plan_encode_sum_now): a
//     worker's whole payload decoded into the message's accumulator in one call.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "codec.h"

namespace {

struct Segment {
  std::unique_ptr<mxgc::Codec> codec;
  int64_t n;               // values
  int64_t value_offset;    // first value in the message's values (the server's accumulator)
  int64_t key_offset;      // first value in its key's array (a key split over servers)
  int64_t payload_offset;  // first word in the message's payload
};

struct Plan {
  std::vector<Segment> segments;
  std::mutex mutex;
  std::string error;  // the first failure of an operation on the engine, until read

  void fail(const std::string& message) {
    std::lock_guard<std::mutex> lock(mutex);
    if (error.empty()) error = message;
  }
};
using PlanRef = std::shared_ptr<Plan>;

// MXNet's C API, handed over by Python (libmxnet is loaded with RTLD_LOCAL, so not found by dlsym).
using PushSyncND = int (*)(void (*)(void*, void*), void*, void (*)(void*), void*, void**, int, void**, int,
                           void*, int, const char*);
using GetData = int (*)(void*, void**);
using Detach = int (*)(void*, void**);
using Free = int (*)(void*);
PushSyncND g_push_sync = nullptr;
GetData g_get_data = nullptr;
Detach g_detach = nullptr;
Free g_free = nullptr;
struct CpuContext {  // mxnet::Context: device type (1: CPU), device id
  int32_t dev_type = 1;
  int32_t dev_id = 0;
} g_cpu;

void report(char* error, int error_size, const std::string& message) {
  if (error && error_size > 0) std::snprintf(error, error_size, "%s", message.c_str());
}

// Writes (or, with ``add``, adds) one segment's decoded values to out.
bool decode_segment(const Segment& s, const float* payload, float* out, bool add, std::string* error) {
  return s.codec->decode(payload, add ? out : nullptr, out, error);
}

// The engine variable behind an NDArray handle is its storage chunk's: the first word of an
// mxnet::NDArray is its std::shared_ptr<Chunk>'s pointer (MXNet 1.9.1's layout).  Views of one
// array share it; an operation must not list one variable twice among its dependencies.
const void* chunk_of(void* handle) { return *static_cast<void* const*>(handle); }

// Handles without repeated chunks; ``exclude``: chunks already listed elsewhere.
std::vector<void*> distinct(const std::vector<void*>& handles, const std::vector<void*>& exclude = {}) {
  std::vector<const void*> seen;
  for (void* h : exclude) seen.push_back(chunk_of(h));
  std::vector<void*> out;
  for (void* h : handles) {
    if (!h) continue;
    const void* c = chunk_of(h);
    if (std::find(seen.begin(), seen.end(), c) != seen.end()) continue;
    seen.push_back(c);
    out.push_back(h);
  }
  return out;
}

// An array's memory, asked for when the operation runs: MXNet allocates an array lazily, on the engine
// thread of the first operation that writes it, and asked at push time it may answer from a racing
// allocation of its own whose memory the array then does not keep.
float* data_of(void* handle) {
  void* p = nullptr;
  if (!handle || g_get_data(handle, &p) != 0) return nullptr;
  return static_cast<float*>(p);
}

// A handle of the operation's own on the array behind ``handle`` (null stays null): the caller's handle
// may be freed before the operation runs.
void* own(void* handle) {
  void* copy = nullptr;
  if (handle && g_detach(handle, &copy) != 0) return nullptr;
  return copy;
}

// One engine operation's work: the plan, and the arrays it reads and writes (its own handles; per
// segment two, null: none or skipped).
struct Job {
  PlanRef plan;
  bool encode;
  void* payload;
  void* counts = nullptr;             // encode: float64, per segment its non-finite gradient values (or null)
  std::vector<void*> values, states;  // encode: gradients and states; decode: outputs
  int count = 1;                      // decode: payloads summed, in order, ``stride`` words apart
  int64_t stride = 0;
  bool accumulate = false;            // decode: added to the outputs' values (else written over them)

  Job(PlanRef p, bool e, void* payload_handle, int c = 1, int64_t s = 0, bool a = false)
      : plan(std::move(p)), encode(e), payload(own(payload_handle)), values(plan->segments.size(), nullptr),
        states(plan->segments.size(), nullptr), count(c), stride(s), accumulate(a) {}
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;
  ~Job() {
    for (void* h : values) if (h) g_free(h);
    for (void* h : states) if (h) g_free(h);
    if (payload) g_free(payload);
    if (counts) g_free(counts);
  }
};

void run_job(void*, void* param) {
  Job* job = static_cast<Job*>(param);
  const auto& segments = job->plan->segments;
  float* payload = data_of(job->payload);
  double* counts = job->counts ? reinterpret_cast<double*>(data_of(job->counts)) : nullptr;
  if (!payload || (job->counts && !counts)) {
    job->plan->fail("the payload or counts array has no data");
    return;
  }
  for (size_t i = 0; i < segments.size(); ++i) {
    const Segment& s = segments[i];
    if (!job->values[i]) continue;
    float* values = data_of(job->values[i]);
    float* state = data_of(job->states[i]);
    if (!values || (job->encode && s.codec->state_words() > 0 && !state)) {
      job->plan->fail("segment " + std::to_string(i) + ": an array without data");
      continue;
    }
    values += s.key_offset;
    if (job->encode) {
      const int64_t nonfinite = s.codec->encode(values, state, payload + s.payload_offset);
      if (counts) counts[i] = static_cast<double>(nonfinite);
      continue;
    }
    for (int k = 0; k < job->count; ++k) {
      std::string error;
      if (!decode_segment(s, payload + k * job->stride + s.payload_offset, values, job->accumulate || k > 0, &error)) {
        const std::string which = job->count > 1 ? "payload " + std::to_string(k) + " of " + std::to_string(job->count) +
                                                       ", " : "";
        job->plan->fail(which + "segment " + std::to_string(i) + ": " + error);
        break;
      }
    }
  }
}

void delete_job(void* param) { delete static_cast<Job*>(param); }

// Pushes a job reading ``reads`` and writing ``writes`` (NDArray handles) to MXNet's engine.
int push(Job* job, const std::vector<void*>& reads, const std::vector<void*>& writes, int priority,
         const char* name, char* error, int error_size) {
  std::vector<void*> mutable_nds = distinct(writes);
  std::vector<void*> const_nds = distinct(reads, mutable_nds);
  if (g_push_sync(run_job, job, delete_job, &g_cpu, const_nds.data(), static_cast<int>(const_nds.size()),
                  mutable_nds.data(), static_cast<int>(mutable_nds.size()), nullptr, priority, name) != 0) {
    delete job;
    report(error, error_size, "MXEnginePushSyncND failed");
    return -1;
  }
  return 0;
}

}  // namespace

extern "C" {

// Gives the library MXNet's MXEnginePushSyncND, MXNDArrayGetData, MXNDArrayDetach and MXNDArrayFree
// (Python passes their addresses).
void mxgc_engine_bind(void* push_sync_nd, void* get_data, void* detach, void* free) {
  g_push_sync = reinterpret_cast<PushSyncND>(push_sync_nd);
  g_get_data = reinterpret_cast<GetData>(get_data);
  g_detach = reinterpret_cast<Detach>(detach);
  g_free = reinterpret_cast<Free>(free);
}

// A new plan of ``num_segments`` segments; per segment its codec's name ("dense" or a line of
// codecs.def), values, offsets and ``num_params[i]`` parameters (concatenated in ``params``).  Returns
// null with a message in ``error`` for a bad one.
void* mxgc_plan_new(int num_segments, const char* const* names, const int64_t* sizes, const int64_t* value_offsets,
                    const int64_t* key_offsets, const int64_t* payload_offsets, const int* num_params,
                    const double* params, char* error, int error_size) {
  auto plan = std::make_shared<Plan>();
  for (int i = 0; i < num_segments; ++i) {
    std::string message;
    Segment s{mxgc::make_codec(names[i], params, num_params[i], sizes[i], &message), sizes[i], value_offsets[i],
              key_offsets[i], payload_offsets[i]};
    params += num_params[i];
    if (!s.codec) {
      report(error, error_size, "segment " + std::to_string(i) + ": " + message);
      return nullptr;
    }
    plan->segments.push_back(std::move(s));
  }
  return new PlanRef(plan);
}

void mxgc_plan_free(void* plan) { delete static_cast<PlanRef*>(plan); }

// Copies the first failure of an operation of this plan on the engine into ``error`` and forgets it;
// returns 1 if there was one.
int mxgc_plan_take_error(void* plan, char* error, int error_size) {
  Plan& p = **static_cast<PlanRef*>(plan);
  std::lock_guard<std::mutex> lock(p.mutex);
  if (p.error.empty()) return 0;
  report(error, error_size, p.error);
  p.error.clear();
  return 1;
}

// Engine operation: encodes every segment of ``values`` (an NDArray handle per segment: its key's whole
// array) with its state (an NDArray handle, or null for dense segments) into ``payload``, and writes
// each segment's number of non-finite gradient values, counted in the same pass, into ``counts`` (a
// float64 NDArray of one value per segment, or null).
int mxgc_plan_push_encode(void* plan, void** values, void** states, void* payload, void* counts, int priority,
                          char* error, int error_size) {
  const PlanRef& p = *static_cast<PlanRef*>(plan);
  const size_t n = p->segments.size();
  auto job = new Job(p, true, payload);
  job->counts = own(counts);
  std::vector<void*> reads(values, values + n), writes(states, states + n);
  writes.push_back(payload);
  writes.push_back(counts);
  for (size_t i = 0; i < n; ++i) {
    job->values[i] = own(values[i]);
    job->states[i] = own(states[i]);
    if (!job->values[i] || (p->segments[i].codec->state_words() > 0 && !job->states[i])) {
      delete job;
      report(error, error_size, "segment " + std::to_string(i) + ": no array");
      return -1;
    }
  }
  if (!job->payload) {
    delete job;
    report(error, error_size, "no payload array");
    return -1;
  }
  return push(job, reads, writes, priority, "mxgc_message_encode", error, error_size);
}

// Engine operation: decodes ``payload`` into ``outputs`` (an NDArray handle per segment: its key's whole
// array, or null to skip the segment), and writes ``token`` (a one-value array a later operation
// can wait on instead of the outputs; may be null).  ``count`` payloads ``stride`` words apart (the
// workers' payloads of an allgather) are summed in order; with ``accumulate`` the sum is added to the
// outputs (a compressed weight pull: a difference to the weights they hold).  A corrupt segment is
// reported by mxgc_plan_take_error.
int mxgc_plan_push_decode(void* plan, void* payload, int count, int64_t stride, int accumulate, void** outputs,
                          void* token, int priority, char* error, int error_size) {
  const PlanRef& p = *static_cast<PlanRef*>(plan);
  const size_t n = p->segments.size();
  auto job = new Job(p, false, payload, count, stride, accumulate != 0);
  std::vector<void*> writes(outputs, outputs + n);
  writes.push_back(token);
  for (size_t i = 0; i < n; ++i) job->values[i] = own(outputs[i]);
  if (!job->payload) {
    delete job;
    report(error, error_size, "no payload array");
    return -1;
  }
  return push(job, {payload}, writes, priority, "mxgc_message_decode", error, error_size);
}

// At once: decodes a worker's whole payload into the message's values (``add``: adds to them).
// Returns 0, or -1 with a message (values then partly written).
int mxgc_plan_decode_now(void* plan, const float* payload, float* values, int add, char* error, int error_size) {
  const Plan& p = **static_cast<PlanRef*>(plan);
  for (size_t i = 0; i < p.segments.size(); ++i) {
    const Segment& s = p.segments[i];
    std::string message;
    if (!decode_segment(s, payload + s.payload_offset, values + s.value_offset, add != 0, &message)) {
      report(error, error_size, "segment " + std::to_string(i) + ": " + message);
      return -1;
    }
  }
  return 0;
}

// At once: re-encodes the message's summed values into ``payload`` for a compressed pull, with the
// server's own residual (each codec's encode_sum).
int mxgc_plan_encode_sum_now(void* plan, const float* values, float* residual, float* payload, char* error,
                             int error_size) {
  const Plan& p = **static_cast<PlanRef*>(plan);
  for (size_t i = 0; i < p.segments.size(); ++i) {
    const Segment& s = p.segments[i];
    std::string message;
    if (!s.codec->encode_sum(values + s.value_offset, residual + s.value_offset, payload + s.payload_offset,
                             &message)) {
      report(error, error_size, "segment " + std::to_string(i) + ": " + message);
      return -1;
    }
  }
  return 0;
}

}  // extern "C"
