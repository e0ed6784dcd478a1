// jaxbridge.mujoco's field call in C: an XLA FFI handler over MuJoCo's batch API (mjbatch.h).
//
// One call does what `FieldRows._run` (jaxbridge/mujoco/_fields.py) does in Python, with no
// Python and no GIL: it copies XLA's input buffers into the batch's state rows, resets the
// advanced columns no input gives, runs mjb_step (or mjb_forward) on every row, and copies the
// outputs (state columns, bound MjData fields, warning counts) into XLA's result buffers.
//
// A plan (`Rows`) is made once per batch from Python through the jb_rows_* functions below
// (ctypes; `_native.py`), and its address is the call's `plan` attribute. Plans are never
// freed: a compiled program may hold one as long as the process lives. Calls on one plan are
// serialised by its mutex (XLA may run two host calls of one program at once).
//
// Built by `jaxbridge.mujoco._native` with the system C++ compiler on first use, against
// jaxlib's FFI headers and the installed MuJoCo.

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include <mujoco/mjbatch.h>
#include <mujoco/mujoco.h>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

// Columns [row, row + width) of a state row from columns [src, src + width) of a buffer's row.
struct Run {
  int row;
  int src;
  int width;
};

struct Input {
  int width;  // float64 columns of the buffer's row
  std::vector<Run> runs;
};

enum OutputKind { kState = 0, kField = 1, kWarning = 2 };

struct Output {
  OutputKind kind;
  int width;              // bytes of the buffer's row
  std::vector<Run> runs;  // kState: the state columns (float64 columns of the buffer's row)
  const char* storage;    // kField: the bound field's (nsim x width bytes), mjb_output's
  int elemsize = 8;       // kField: bytes of one element (8: mjtNum, 4: int)
};

// The physics callbacks (mjcb_*) the batch's threads would call. MuJoCo's Python bindings
// keep some set for their own use, so a plan records them when it is made (when no Python
// callback is installed: `_native.callbacks_installed`) and refuses a call after a change.
struct Callbacks {
  void* fn[8];
  const char* names[8];
  Callbacks() {
    void* now[8] = {reinterpret_cast<void*>(mjcb_passive),   reinterpret_cast<void*>(mjcb_control),
                    reinterpret_cast<void*>(mjcb_contactfilter),
                    reinterpret_cast<void*>(mjcb_sensor),    reinterpret_cast<void*>(mjcb_time),
                    reinterpret_cast<void*>(mjcb_act_dyn),   reinterpret_cast<void*>(mjcb_act_gain),
                    reinterpret_cast<void*>(mjcb_act_bias)};
    const char* n[8] = {"mjcb_passive", "mjcb_control",  "mjcb_contactfilter", "mjcb_sensor",
                        "mjcb_time",    "mjcb_act_dyn", "mjcb_act_gain",      "mjcb_act_bias"};
    for (int i = 0; i < 8; ++i) {
      fn[i] = now[i];
      names[i] = n[i];
    }
  }
  // The name of a callback that differs from `then`'s, or nullptr.
  const char* Changed(const Callbacks& then) const {
    for (int i = 0; i < 8; ++i) {
      if (fn[i] != then.fn[i]) return names[i];
    }
    return nullptr;
  }
};

struct Rows {
  mjBatch* batch = nullptr;
  std::vector<const mjModel*> models;  // the caller's model for every simulation
  int B = 0, nstate = 0, nstep = 1, forward = 0, stage = 0;
  mjtNum* state = nullptr;
  std::vector<mjtNum> defaults;  // mj_resetData's row
  std::vector<Input> inputs;
  std::vector<Run> resets;  // the advanced columns no input gives: reset before each step
  std::vector<Output> outputs;
  bool warnings = false;  // some output counts warnings: zero the counters before each call
  std::string name = "mujoco";
  Callbacks callbacks;  // as they were when the plan was made
  int64_t calls = 0;    // batch calls made (for tests and diagnostics)
  std::mutex mutex;
};

bool ReadRuns(int nrun, const int* runs, std::vector<Run>* out) {
  for (int i = 0; i < nrun; ++i) {
    Run r{runs[3 * i], runs[3 * i + 1], runs[3 * i + 2]};
    if (r.row < 0 || r.src < 0 || r.width < 0) return false;
    out->push_back(r);
  }
  return true;
}

// This process's token, random, set once when the library is loaded: every call carries the
// token of the process that compiled it, so that a program compiled elsewhere (JAX's
// persistent compilation cache) is refused before its plan address is read.
int64_t g_token = 0;

ffi::Error Fail(const Rows& p, const std::string& what) {
  return ffi::Error(ffi::ErrorCode::kInternal,
                    "host function '" + p.name + "' (jaxbridge.mujoco's compiled field call): " +
                        what);
}

ffi::Error RowsCall(ffi::RemainingArgs args, ffi::RemainingRets rets, int64_t plan,
                    int64_t token, ffi::Span<const int64_t> slots) {
  if (token != g_token || g_token == 0) {
    return ffi::Error(ffi::ErrorCode::kFailedPrecondition,
                      "jaxbridge.mujoco's compiled field call: this program was compiled in "
                      "another process (JAX's persistent compilation cache?), and its MuJoCo "
                      "batch lives there. Compile it again in this process: leave this "
                      "program out of the cache, or clear the cache.");
  }
  Rows& p = *reinterpret_cast<Rows*>(plan);
  if (args.size() != p.inputs.size() || rets.size() != slots.size()) {
    return Fail(p, "the call's buffers do not match its plan (" + std::to_string(args.size()) +
                       " inputs, " + std::to_string(rets.size()) + " outputs).");
  }
  if (const char* cb = Callbacks().Changed(p.callbacks)) {
    return Fail(p, std::string("a MuJoCo physics callback (") + cb +
                       ") changed after this program was compiled, and the compiled path "
                       "serves no callbacks. Call jax.clear_caches() so that it compiles "
                       "again, on the host-call path, which handles them.");
  }
  const int B = p.B, ns = p.nstate;
  std::lock_guard<std::mutex> lock(p.mutex);
  mjtNum* rows = p.state;
  // every input is read into the rows before any output is written: an output may share its
  // input's buffer (input_output_aliases)
  for (size_t k = 0; k < p.inputs.size(); ++k) {
    auto buf = args.get<ffi::AnyBuffer>(k);
    if (buf.has_error()) return buf.error();
    const Input& in = p.inputs[k];
    const bool f32 = buf->element_type() == ffi::DataType::F32;
    if ((!f32 && buf->element_type() != ffi::DataType::F64) ||
        buf->element_count() != static_cast<size_t>(B) * in.width) {
      return Fail(p, "input " + std::to_string(k) + " is not (" + std::to_string(B) + ", " +
                         std::to_string(in.width) + ") float64 or float32.");
    }
    if (f32) {  // a float32 program (x64 off): widened exactly into MuJoCo's float64 rows
      const float* src = static_cast<const float*>(buf->untyped_data());
      for (int b = 0; b < B; ++b) {
        const float* from = src + static_cast<size_t>(b) * in.width;
        mjtNum* to = rows + static_cast<size_t>(b) * ns;
        for (const Run& r : in.runs) {
          for (int j = 0; j < r.width; ++j) to[r.row + j] = static_cast<mjtNum>(from[r.src + j]);
        }
      }
      continue;
    }
    const double* src = static_cast<const double*>(buf->untyped_data());
    for (int b = 0; b < B; ++b) {
      const double* from = src + static_cast<size_t>(b) * in.width;
      mjtNum* to = rows + static_cast<size_t>(b) * ns;
      for (const Run& r : in.runs) {
        std::memcpy(to + r.row, from + r.src, sizeof(mjtNum) * r.width);
      }
    }
  }
  if (!p.forward) {
    for (int b = 0; b < B; ++b) {
      mjtNum* to = rows + static_cast<size_t>(b) * ns;
      for (const Run& r : p.resets) {
        std::memcpy(to + r.row, p.defaults.data() + r.row, sizeof(mjtNum) * r.width);
      }
    }
  }
  mjWarningStat* warning = mjb_warning(p.batch);
  if (p.warnings) {
    std::memset(warning, 0, sizeof(mjWarningStat) * mjNWARNING * B);
  }
  ++p.calls;
  int nfail = p.forward ? mjb_forward(p.batch, nullptr, 0, p.stage)
                        : mjb_step(p.batch, nullptr, 0, p.nstep, p.stage);
  if (nfail) {
    const int* status = mjb_status(p.batch);
    std::string ids;
    int first = -1, shown = 0;
    for (int i = 0; i < B; ++i) {
      if (!status[i]) continue;
      if (first < 0) first = i;
      if (shown < 5) ids += (shown ? ", " : "") + std::to_string(i);
      ++shown;
    }
    if (shown > 5) ids += ", ...";
    std::string message = first < 0 ? std::string("") : std::string(mjb_error(p.batch, first));
    return Fail(p, "MuJoCo raised in " + std::to_string(nfail) + " of " + std::to_string(B) +
                       " simulations (" + ids + "); simulation " + std::to_string(first) + ": " +
                       message);
  }
  for (size_t k = 0; k < slots.size(); ++k) {
    auto buf = rets.get<ffi::AnyBuffer>(k);
    if (buf.has_error()) return buf.error();
    int64_t slot = slots[k];
    if (slot < 0 || slot >= static_cast<int64_t>(p.outputs.size())) {
      return Fail(p, "output slot " + std::to_string(slot) + " is not in the plan.");
    }
    const Output& out = p.outputs[slot];
    // A float32 result of a float64 column or field (x64 off): each value rounded once, as
    // NumPy's astype(float32) rounds it. Warning counts are int32 in every program.
    const bool f32 = (*buf)->element_type() == ffi::DataType::F32;
    const size_t want = static_cast<size_t>(B) * out.width / (f32 ? 2 : 1);
    if ((f32 && (out.kind == kWarning || out.elemsize != 8 || out.width % 8 != 0)) ||
        (*buf)->size_bytes() != want) {
      return Fail(p, "output " + std::to_string(k) + " has " +
                         std::to_string((*buf)->size_bytes()) + " bytes" +
                         (f32 ? " of float32" : "") + ", not " + std::to_string(want) + ".");
    }
    char* dst = static_cast<char*>((*buf)->untyped_data());
    if (f32) {
      float* to = reinterpret_cast<float*>(dst);
      const int cols = out.width / 8;  // float64 columns of a row
      if (out.kind == kState) {
        for (int b = 0; b < B; ++b) {
          const mjtNum* from = rows + static_cast<size_t>(b) * ns;
          float* row = to + static_cast<size_t>(b) * cols;
          for (const Run& r : out.runs) {
            for (int j = 0; j < r.width; ++j) row[r.src + j] = static_cast<float>(from[r.row + j]);
          }
        }
      } else {  // kField: mjb_output's float64 storage, nsim x width bytes
        const double* from = reinterpret_cast<const double*>(out.storage);
        const size_t n = static_cast<size_t>(B) * cols;
        for (size_t i = 0; i < n; ++i) to[i] = static_cast<float>(from[i]);
      }
      continue;
    }
    switch (out.kind) {
      case kState:
        for (int b = 0; b < B; ++b) {
          const mjtNum* from = rows + static_cast<size_t>(b) * ns;
          double* to = reinterpret_cast<double*>(dst + static_cast<size_t>(b) * out.width);
          for (const Run& r : out.runs) {
            std::memcpy(to + r.src, from + r.row, sizeof(mjtNum) * r.width);
          }
        }
        break;
      case kField:
        std::memcpy(dst, out.storage, static_cast<size_t>(B) * out.width);
        break;
      case kWarning: {
        int32_t* to = reinterpret_cast<int32_t*>(dst);
        for (int i = 0; i < B * mjNWARNING; ++i) to[i] = warning[i].number;
        break;
      }
    }
  }
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(jb_rows_call, RowsCall,
                              ffi::Ffi::Bind()
                                  .RemainingArgs()
                                  .RemainingRets()
                                  .Attr<int64_t>("plan")
                                  .Attr<int64_t>("token")
                                  .Attr<ffi::Span<const int64_t>>("slots"));

extern "C" {

// A plan of B simulations of model m (the caller's: it must outlive the plan) on nthread
// threads, one mjData per thread; nullptr with the reason in error on failure.
void* jb_rows_new(const mjModel* m, int B, int nthread, int forward, int nstep, int stage,
                  char* error, int error_sz) {
  if (!m || B < 1 || nstep < 1) {
    std::snprintf(error, error_sz, "bad plan arguments (B=%d, nstep=%d)", B, nstep);
    return nullptr;
  }
  mjBatchConfig config;
  mjb_defaultConfig(&config);
  config.nthread = nthread;
  config.persistent = 0;
  mjBatch* batch = mjb_makeBatch(m, B, &config, error, error_sz);
  if (!batch) return nullptr;
  Rows* p = new Rows();
  p->batch = batch;
  p->models.assign(B, m);
  mjb_setModels(batch, p->models.data());  // edits of the caller's model are seen
  mjb_reset(batch, nullptr, 0, nullptr, mjSTAGE_NONE);
  p->B = B;
  p->nstate = mjb_nstate(batch);
  p->nstep = nstep;
  p->forward = forward;
  p->stage = stage;
  p->state = mjb_state(batch);
  p->defaults.assign(p->state, p->state + p->nstate);
  return p;
}

// Sets this process's token (once, when the library is loaded; nonzero).
void jb_rows_set_token(int64_t token) { g_token = token; }

// The batch calls the plan has made.
int64_t jb_rows_calls(void* plan) {
  Rows* p = static_cast<Rows*>(plan);
  std::lock_guard<std::mutex> lock(p->mutex);
  return p->calls;
}

void jb_rows_set_name(void* plan, const char* name) { static_cast<Rows*>(plan)->name = name; }

// The next input: a (B, width) float64 buffer, its columns written by the runs (row, src,
// width triples). Returns 0, or -1 for a bad run.
int jb_rows_add_input(void* plan, int width, int nrun, const int* runs) {
  Rows* p = static_cast<Rows*>(plan);
  Input in{width, {}};
  if (!ReadRuns(nrun, runs, &in.runs)) return -1;
  for (const Run& r : in.runs) {
    if (r.row + r.width > p->nstate || r.src + r.width > width) return -1;
  }
  p->inputs.push_back(in);
  return 0;
}

// Columns reset to mj_resetData's before each step (row, src (unused), width triples).
int jb_rows_add_reset(void* plan, int nrun, const int* runs) {
  Rows* p = static_cast<Rows*>(plan);
  std::vector<Run> got;
  if (!ReadRuns(nrun, runs, &got)) return -1;
  for (const Run& r : got) {
    if (r.row + r.width > p->nstate) return -1;
  }
  p->resets.insert(p->resets.end(), got.begin(), got.end());
  return 0;
}

// An output of state columns, width float64 columns a row. Returns its slot, or -1.
int jb_rows_add_state_output(void* plan, int width, int nrun, const int* runs) {
  Rows* p = static_cast<Rows*>(plan);
  Output out{kState, static_cast<int>(sizeof(mjtNum)) * width, {}, nullptr};
  if (!ReadRuns(nrun, runs, &out.runs)) return -1;
  for (const Run& r : out.runs) {
    if (r.row + r.width > p->nstate || r.src + r.width > width) return -1;
  }
  p->outputs.push_back(out);
  return static_cast<int>(p->outputs.size()) - 1;
}

// An output of MjData field name, copied out by the batch after every call: its slot (size
// and elemsize written), or -1 where mjb_output refuses the name.
int jb_rows_add_field_output(void* plan, const char* name, int* size, int* elemsize) {
  Rows* p = static_cast<Rows*>(plan);
  void* storage = mjb_output(p->batch, name, size, elemsize);
  if (!storage) return -1;
  p->outputs.push_back(Output{kField, *size * *elemsize, {}, static_cast<const char*>(storage), *elemsize});
  return static_cast<int>(p->outputs.size()) - 1;
}

// An output of each row's warning counts (mjNWARNING int32, the call's). Returns its slot.
int jb_rows_add_warning_output(void* plan) {
  Rows* p = static_cast<Rows*>(plan);
  p->warnings = true;
  p->outputs.push_back(Output{kWarning, static_cast<int>(sizeof(int32_t)) * mjNWARNING, {},
                              nullptr});
  return static_cast<int>(p->outputs.size()) - 1;
}

}  // extern "C"
