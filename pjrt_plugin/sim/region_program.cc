#include "region_program.h"

#include <cstring>
#include <string>

#include "elementwise.h"
#include "runtime.h"
#include "strided_view.h"

namespace trn::sim {
namespace {

constexpr int64_t kMaxRegionArgs = 64;
constexpr int64_t kMaxRegionSteps = 4096;

bool IsCompare(AluOp op) {
  return op == AluOp::kEq || op == AluOp::kNe || op == AluOp::kLt || op == AluOp::kLe || op == AluOp::kGt || op == AluOp::kGe;
}

// A view of `n` dense elements of `dtype` in `bytes`.
StridedView Dense(std::vector<uint8_t>& bytes, DType dtype, size_t n) {
  bytes.resize(n * DTypeSize(dtype));
  StridedView view;
  view.base = bytes.data();
  view.dtype = dtype;
  view.rank = 1;
  view.stride_bytes[0] = DTypeSize(dtype);
  view.count[0] = static_cast<int64_t>(n);
  return view;
}

// The typing rule of one step over already-typed registers; an error names the step.
Status CheckStep(const RegionProgram& region, size_t i) {
  const RegionStep& s = region.steps[i];
  const int64_t defined = static_cast<int64_t>(region.args.size() + i);
  const std::string where = "region step " + std::to_string(i);
  if (s.code == kRegionConstant) return Status::Ok();
  const auto operand = [&](int64_t r) -> StatusOr<DType> {
    if (r < 0 || r >= defined) return InvalidArgument(where + " reads register " + std::to_string(r) + " before it is written");
    return region.RegisterDType(r);
  };
  const StatusOr<DType> a = operand(s.a);
  if (!a.ok()) return a.status();
  if (s.code == kRegionBitcast) {
    if (DTypeSize(a.value()) != DTypeSize(s.dtype)) return InvalidArgument(where + " bitcasts " + DTypeName(a.value()) + " to " + DTypeName(s.dtype));
    return Status::Ok();
  }
  const int arity = AluArity(s.code);
  if (arity == 0) return InvalidArgument(where + " has unknown op code " + std::to_string(s.code));
  std::vector<DType> types{a.value()};
  for (int64_t r : {s.b, s.c}) {
    if (static_cast<int>(types.size()) == arity) break;
    const StatusOr<DType> t = operand(r);
    if (!t.ok()) return t.status();
    types.push_back(t.value());
  }
  const AluOp op = static_cast<AluOp>(s.code);
  const bool ternary = op == AluOp::kSelect || op == AluOp::kClamp;
  const DType data = types[ternary ? 1 : 0];
  TRN_RETURN_IF_ERROR(CheckAluOp(s.code, arity, data));
  const std::string message = where + ": " + AluOpName(op) + " of ";
  const auto all_same = [&](size_t from) {
    for (size_t k = from; k < types.size(); ++k) {
      if (types[k] != data) return false;
    }
    return true;
  };
  if (op == AluOp::kCopy) return Status::Ok();  // a conversion to the step's dtype
  if (op == AluOp::kSelect) {
    if (types[0] != DType::kPred || types[2] != data || s.dtype != data) return InvalidArgument(message + "mismatched types");
    return Status::Ok();
  }
  if (!all_same(0)) return InvalidArgument(message + "operands of different dtypes");
  if (s.dtype != (IsCompare(op) ? DType::kPred : data)) return InvalidArgument(message + DTypeName(data) + " cannot write " + DTypeName(s.dtype));
  return Status::Ok();
}

Values Step(const RegionProgram& region, const RegionStep& s, const std::vector<Values>& reg, size_t n) {
  const Domain domain = ComputeDomain(s.dtype);
  if (s.code == kRegionConstant) {
    Scalar value{s.dtype, 0, s.a};
    std::memcpy(&value.float_value, &s.a, sizeof(double));
    return ScalarValues(value, domain, n);
  }
  if (s.code == kRegionBitcast) {
    std::vector<uint8_t> bytes;
    Scatter(reg[s.a], Dense(bytes, region.RegisterDType(s.a), n));
    return Gather(Dense(bytes, s.dtype, n), domain);
  }
  const AluOp op = static_cast<AluOp>(s.code);
  const DType a_dtype = region.RegisterDType(s.a);
  switch (AluArity(s.code)) {
    case 1: {
      if (op == AluOp::kCopy) return ConvertValues(reg[s.a], domain);
      Values x = reg[s.a];
      ApplyUnary(op, a_dtype, x);
      return x;
    }
    case 2: {
      Values x = reg[s.a];
      ApplyBinary(op, a_dtype, x, reg[s.b]);
      return IsCompare(op) ? ConvertValues(x, domain) : x;
    }
    default: break;
  }
  Values x = reg[s.b];
  if (op == AluOp::kSelect) {
    ApplySelect(reg[s.a], x, reg[s.c]);
  } else {  // clamp(lo, x, hi) = min(max(x, lo), hi)
    ApplyBinary(AluOp::kMax, s.dtype, x, reg[s.a]);
    ApplyBinary(AluOp::kMin, s.dtype, x, reg[s.c]);
  }
  return x;
}

}  // namespace

Values PickElements(const Values& v, const std::vector<int64_t>& at) {
  Values out = Values::Uninitialized(v.domain, at.size());
  WithDomainType(v.domain, [&](auto tag) {
    using T = decltype(tag);
    const T* in = v.data<T>();
    T* o = out.data<T>();
    for (size_t k = 0; k < at.size(); ++k) o[k] = in[at[k]];
  });
  return out;
}

void PutElements(Values& v, const std::vector<int64_t>& at, const Values& from) {
  WithDomainType(v.domain, [&](auto tag) {
    using T = decltype(tag);
    const T* in = from.data<T>();
    T* o = v.data<T>();
    for (size_t k = 0; k < at.size(); ++k) o[at[k]] = in[k];
  });
}

void RoundToDType(DType dtype, Values& v) {
  if (dtype == DType::kPred) {  // any nonzero value is true
    WithDomainType(v.domain, [&](auto tag) {
      using T = decltype(tag);
      T* x = v.data<T>();
      for (size_t i = 0; i < v.size(); ++i) x[i] = x[i] != T{0} ? T{1} : T{0};
    });
    return;
  }
  const bool exact = dtype == DType::kF32 || dtype == DType::kF64 || dtype == DType::kS64 || dtype == DType::kU64;
  if (exact || v.size() == 0) return;
  std::vector<uint8_t> bytes;
  const StridedView view = Dense(bytes, dtype, v.size());
  Scatter(v, view);
  v = Gather(view, v.domain);
}

StatusOr<RegionProgram> DecodeRegion(const std::vector<int64_t>& words) {
  if (words.size() < 3) return InvalidArgument("region program of " + std::to_string(words.size()) + " words (expected a 3-word header)");
  const int64_t args = words[0], results = words[1], steps = words[2];
  if (args < 1 || args > kMaxRegionArgs || results < 1 || results > kMaxRegionArgs || steps < 0 || steps > kMaxRegionSteps) {
    return InvalidArgument("region program header (" + std::to_string(args) + " args, " + std::to_string(results) + " results, " +
                           std::to_string(steps) + " steps) out of range");
  }
  if (static_cast<int64_t>(words.size()) != 3 + args + results + 5 * steps) {
    return InvalidArgument("region program of " + std::to_string(words.size()) + " words does not hold its header's args, results and steps");
  }
  RegionProgram region;
  size_t at = 3;
  const auto dtype = [&](int64_t code) -> StatusOr<DType> {
    if (code < 0 || code > 255 || !IsValidDType(static_cast<uint8_t>(code)) || IsTableOnly(static_cast<DType>(code))) {
      return InvalidArgument("region dtype code " + std::to_string(code));
    }
    return static_cast<DType>(code);
  };
  for (int64_t i = 0; i < args; ++i) {
    const StatusOr<DType> t = dtype(words[at++]);
    if (!t.ok()) return t.status();
    region.args.push_back(t.value());
  }
  region.results.assign(words.begin() + at, words.begin() + at + results);
  at += results;
  for (int64_t i = 0; i < steps; ++i, at += 5) {
    const StatusOr<DType> t = dtype(words[at + 1]);
    if (!t.ok()) return t.status();
    if (words[at] < 0 || words[at] > 255) return InvalidArgument("region step " + std::to_string(i) + " op code " + std::to_string(words[at]));
    region.steps.push_back({static_cast<uint8_t>(words[at]), t.value(), words[at + 2], words[at + 3], words[at + 4]});
    TRN_RETURN_IF_ERROR(CheckStep(region, static_cast<size_t>(i)));
  }
  const int64_t registers = args + steps;
  for (int64_t r : region.results) {
    if (r < 0 || r >= registers) return InvalidArgument("region result register " + std::to_string(r) + " of " + std::to_string(registers));
  }
  return region;
}

std::vector<Values> EvaluateRegion(const RegionProgram& region, const std::vector<Values>& args) {
  const size_t n = args.empty() ? 0 : args[0].size();
  std::vector<Values> reg(args);
  reg.reserve(args.size() + region.steps.size());
  for (const RegionStep& s : region.steps) {
    Values v = Step(region, s, reg, n);
    RoundToDType(s.dtype, v);
    reg.push_back(std::move(v));
  }
  std::vector<Values> out;
  for (int64_t r : region.results) out.push_back(reg[r]);
  return out;
}

}  // namespace trn::sim
