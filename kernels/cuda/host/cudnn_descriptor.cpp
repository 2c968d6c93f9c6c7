#include "kernels/cuda/host/cudnn_descriptor.h"

#include <utility>

#include <fmt/format.h>

namespace tune::kernels::cuda::cudnn {

void check(const CudnnApi& api, int status, const char* call, const std::string& detail, SourceLine where) {
    if (status == kStatusSuccess) return;
    const char* name = api.get_error_string != nullptr ? api.get_error_string(status) : nullptr;
    CallFailure failure{
        Library::cudnn, status, name != nullptr ? name : "CUDNN_STATUS_?", detail, {call, where.file, where.line}};
    throw CallError(std::move(failure));
}

Descriptor::Descriptor(const CudnnApi& api, DescriptorType type, SourceLine where)
    : api_(&api), type_(type), where_(where) {
    check(api, api.create_descriptor(static_cast<int>(type), &raw_), "cudnnBackendCreateDescriptor",
          fmt::format("descriptor type {}", static_cast<int>(type)), where);
}

Descriptor::~Descriptor() {
    if (raw_ != nullptr) api_->destroy_descriptor(raw_);
}

Descriptor::Descriptor(Descriptor&& other) noexcept
    : api_(other.api_), type_(other.type_), raw_(std::exchange(other.raw_, nullptr)), where_(other.where_) {}

Descriptor& Descriptor::operator=(Descriptor&& other) noexcept {
    if (this != &other) {
        if (raw_ != nullptr) api_->destroy_descriptor(raw_);
        api_ = other.api_;
        type_ = other.type_;
        raw_ = std::exchange(other.raw_, nullptr);
        where_ = other.where_;
    }
    return *this;
}

Descriptor& Descriptor::set_raw(Attribute name, AttributeType type, std::int64_t count, const void* elements) {
    check(*api_, api_->set_attribute(raw_, static_cast<int>(name), static_cast<int>(type), count, elements),
          "cudnnBackendSetAttribute",
          fmt::format("descriptor type {}, attribute {}, attribute type {}, {} elements", static_cast<int>(type_),
                      static_cast<int>(name), static_cast<int>(type), count),
          where_);
    return *this;
}

// cuDNN's enumerations are C enums: int elements.
Descriptor& Descriptor::set_enum(Attribute name, AttributeType type, int value) {
    return set_raw(name, type, 1, &value);
}

Descriptor& Descriptor::set(Attribute name, std::int64_t value) {
    return set_raw(name, AttributeType::int64, 1, &value);
}

Descriptor& Descriptor::set(Attribute name, const std::vector<std::int64_t>& values) {
    return set_raw(name, AttributeType::int64, static_cast<std::int64_t>(values.size()), values.data());
}

Descriptor& Descriptor::set(Attribute name, bool value) { return set_raw(name, AttributeType::boolean, 1, &value); }

Descriptor& Descriptor::set(Attribute name, DataType value) {
    return set_enum(name, AttributeType::data_type, static_cast<int>(value));
}

Descriptor& Descriptor::set(Attribute name, PointwiseMode value) {
    return set_enum(name, AttributeType::pointwise_mode, static_cast<int>(value));
}

Descriptor& Descriptor::set(Attribute name, ReductionOperator value) {
    return set_enum(name, AttributeType::reduction_operator, static_cast<int>(value));
}

Descriptor& Descriptor::set(Attribute name, HeuristicMode value) {
    return set_enum(name, AttributeType::heuristic_mode, static_cast<int>(value));
}

Descriptor& Descriptor::set(Attribute name, TensorReordering value) {
    return set_enum(name, AttributeType::tensor_reordering_mode, static_cast<int>(value));
}

Descriptor& Descriptor::set(Attribute name, const Descriptor& value) {
    void* raw = value.get();
    return set_raw(name, AttributeType::backend_descriptor, 1, &raw);
}

Descriptor& Descriptor::set(Attribute name, const std::vector<void*>& descriptors) {
    return set_raw(name, AttributeType::backend_descriptor, static_cast<std::int64_t>(descriptors.size()),
                   descriptors.data());
}

Descriptor& Descriptor::set_handle(Attribute name, void* handle) {
    return set_raw(name, AttributeType::handle, 1, &handle);
}

Descriptor& Descriptor::set_pointers(Attribute name, const std::vector<void*>& pointers) {
    return set_raw(name, AttributeType::void_ptr, static_cast<std::int64_t>(pointers.size()), pointers.data());
}

Descriptor& Descriptor::set_pointer(Attribute name, void* pointer) {
    return set_raw(name, AttributeType::void_ptr, 1, &pointer);
}

int Descriptor::try_finalize() { return api_->finalize(raw_); }

Descriptor& Descriptor::finalize() {
    check(*api_, try_finalize(), "cudnnBackendFinalize", fmt::format("descriptor type {}", static_cast<int>(type_)),
          where_);
    return *this;
}

std::int64_t Descriptor::get_int64(Attribute name) const {
    std::int64_t value = 0, count = 0;
    check(*api_,
          api_->get_attribute(raw_, static_cast<int>(name), static_cast<int>(AttributeType::int64), 1, &count, &value),
          "cudnnBackendGetAttribute",
          fmt::format("descriptor type {}, attribute {}", static_cast<int>(type_), static_cast<int>(name)), where_);
    return value;
}

std::int64_t Descriptor::get_descriptors(Attribute name, std::vector<void*>& out) const {
    std::int64_t count = 0;
    check(*api_,
          api_->get_attribute(raw_, static_cast<int>(name), static_cast<int>(AttributeType::backend_descriptor),
                              static_cast<std::int64_t>(out.size()), &count, out.data()),
          "cudnnBackendGetAttribute",
          fmt::format("descriptor type {}, attribute {}, {} descriptors", static_cast<int>(type_),
                      static_cast<int>(name), out.size()),
          where_);
    return count;
}

}  // namespace tune::kernels::cuda::cudnn
