#pragma once
// A gadget that declares the message types it takes, after Gadgetron's ChannelGadget<T>:
//
//     class FFTGadget final : public TypedGadget<ReconBuffer> {
//         void process(ReconBuffer& rb, Emitter& out) override;
//     };
//
// TypedGadget<A, B> requires one process(A&, Emitter&) and one process(B&, Emitter&). Messages of
// any other type go to pass_on(), which emits them unchanged unless the gadget overrides it.
//
// Pending line operations are settled here and nowhere else: a PendingAcquisition that reaches a
// gadget taking Acquisition but not PendingAcquisition is materialised on the host (line_ops.h) and
// handed over as the plain Acquisition it stands for. Gadgets that take PendingAcquisition get it
// as it is (the accumulator applies the operations in batches on the backend); gadgets that take
// neither pass it on untouched, so the work is never done early.
#include <type_traits>
#include <utility>
#include <variant>

#include "gadgets/gadget.h"
#include "gadgets/line_ops.h"

namespace larmor {
namespace detail {

template <class T, class... Ts>
constexpr bool one_of = (std::is_same_v<T, Ts> || ...);

template <class T, class Variant>
struct is_alternative;
template <class T, class... Vs>
struct is_alternative<T, std::variant<Vs...>> : std::bool_constant<one_of<T, Vs...>> {};

// The handler a TypedGadget requires for each taken type.
template <class T>
class Takes {
public:
    virtual void process(T& msg, Emitter& out) = 0;

protected:
    ~Takes() = default;  // never deleted through this base
};

}  // namespace detail

template <class... Ts>
class TypedGadget : public Gadget, public detail::Takes<Ts>... {
    static_assert(sizeof...(Ts) > 0, "TypedGadget<>: name the message types the gadget takes");
    static_assert((detail::is_alternative<Ts, Message>::value && ...),
                  "TypedGadget<T...>: every T must be an alternative of Message (gadgets/message.h)");

public:
    // Final: a gadget implements the typed overloads, never the dispatch.
    void process(Message msg, Emitter& out) final {
        if ((take<Ts>(msg, out) || ...)) return;
        if constexpr (takes<Acquisition> && !takes<PendingAcquisition>) {
            if (auto* pending = std::get_if<PendingAcquisition>(&msg)) {
                Acquisition acq = materialize(std::move(*pending));
                static_cast<detail::Takes<Acquisition>&>(*this).process(acq, out);
                return;
            }
        }
        pass_on(msg, out);
    }

protected:
    template <class T>
    static constexpr bool takes = detail::one_of<T, Ts...>;

    // Every message the gadget does not take. Override to look at them (counting, logging); an
    // override that does not forward it drops the message.
    virtual void pass_on(Message& msg, Emitter& out) { forward(msg, out); }

private:
    template <class T>
    bool take(Message& msg, Emitter& out) {
        T* t = std::get_if<T>(&msg);
        if (!t) return false;
        static_cast<detail::Takes<T>&>(*this).process(*t, out);
        return true;
    }
};

}  // namespace larmor
