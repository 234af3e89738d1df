/* SPDX-License-Identifier: BSD-3-Clause */
/* Stand-in for Gloo's gloo/common/memory.h, which Debian's libgloo-dev (0.0~git20220518.5b14351) does not ship
 * although gloo/transport/tcp/pair.h includes it. The build searches this directory after the system's
 * (-idirafter), so a Gloo that ships the header uses its own. comm.cc includes pair.h only to reach two members
 * declared before any use of these templates (comm.cc: PairSocket), and instantiates none of them, so their
 * definitions here need only declare the same names. */
#pragma once

#include <memory>

namespace gloo {

template <typename T>
class NonOwningPtr final {
public:
    NonOwningPtr() = default;
    explicit NonOwningPtr(std::shared_ptr<T> p) : ptr_(std::move(p)) {}
    T *get() const { return ptr_.get(); }
    T *operator->() const { return ptr_.get(); }
    explicit operator bool() const { return static_cast<bool>(ptr_); }

private:
    std::shared_ptr<T> ptr_;
};

template <typename T>
class WeakNonOwningPtr final {
public:
    WeakNonOwningPtr() = default;
    NonOwningPtr<T> lock() const { return NonOwningPtr<T>(ptr_.lock()); }

private:
    std::weak_ptr<T> ptr_;
};

template <typename T>
class ShareableNonOwningPtr final {
public:
    explicit ShareableNonOwningPtr(T *p) : ptr_(p, [](T *) {}) {}

private:
    std::shared_ptr<T> ptr_;
};

} // namespace gloo
