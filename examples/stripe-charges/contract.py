"""Stripe's idempotency contract, as the official `stripe` SDK meets it at
chaos's Stripe-shaped provider. Run by the harness's tests
(harness/src/provider_api/stripe.rs, `sdk`), one case at a time:

    .venv/bin/python contract.py CASE http://127.0.0.1:PORT [INVOICE]

Each case prints one JSON object: what the SDK returned or raised. The test
holds it against the provider's ledger of the same run.
"""

import json
import sys
import threading
import time

import stripe

CASE, BASE = sys.argv[1], sys.argv[2]
# The subject the provider attributes the charges to (a declined one, say).
INVOICE = sys.argv[3] if len(sys.argv) > 3 else "inv-1"


def client(retries=0, timeout=5.0):
    return stripe.StripeClient(
        "sk_test_contract",
        base_addresses={"api": BASE},
        http_client=stripe.RequestsClient(timeout=timeout),
        max_network_retries=retries,
    )


def params(invoice=INVOICE, amount=4999, reorder=False):
    fields = [
        ("amount", amount),
        ("currency", "usd"),
        ("confirm", True),
        ("payment_method", "pm_card_visa"),
        ("metadata", {"invoice": invoice, "customer_ref": "c-7"}),
    ]
    return dict(reversed(fields) if reorder else fields)


def create(sdk, key, **kwargs):
    return sdk.v1.payment_intents.create(params=params(**kwargs), options={"idempotency_key": key})


def replayed(obj):
    return obj.last_response.headers.get("Idempotent-Replayed")


def failure(error):
    return {
        "raised": type(error).__name__,
        "status": error.http_status,
        # The SDK names the code only for the errors it has a class for.
        "code": error.code or ((error.json_body or {}).get("error") or {}).get("code"),
        "replayed": (error.headers or {}).get("Idempotent-Replayed"),
    }


def case_replay():
    sdk = client()
    first = create(sdk, "k-replay")
    again = create(sdk, "k-replay", reorder=True)
    fetched = sdk.v1.payment_intents.retrieve(first.id)
    return {
        "first": first.id,
        "again": again.id,
        "first_replayed": replayed(first),
        "again_replayed": replayed(again),
        "status": again.status,
        "amount": again.amount,
        "metadata": fetched.metadata.to_dict(),
    }


def case_saved_500():
    # The SDK retries a 500 itself, under the same key: Stripe answers the
    # saved 500 again, and the SDK gives up with it.
    try:
        create(client(retries=1), "k-500")
        return {"raised": None}
    except stripe.StripeError as error:
        return failure(error)


def case_changed_params():
    sdk = client()
    create(sdk, "k-changed")
    try:
        create(sdk, "k-changed", amount=5000)
        return {"raised": None}
    except stripe.StripeError as error:
        return failure(error)


def case_in_flight():
    # The provider takes 400 ms to execute; a second request with the key
    # comes meanwhile: 409 to a client that does not retry, and the SDK that
    # does retry (409 is retryable to it) later gets the saved answer.
    results = {}

    def first():
        results["first"] = create(client(), "k-flight").id

    thread = threading.Thread(target=first)
    thread.start()
    time.sleep(0.1)
    try:
        create(client(), "k-flight")
        results["second"] = {"raised": None}
    except stripe.StripeError as error:
        results["second"] = failure(error)
    retried = create(client(retries=1), "k-flight")
    thread.join()
    results["retried"] = {"id": retried.id, "replayed": replayed(retried)}
    return results


def case_pruned():
    sdk = client()
    first = create(sdk, "k-pruned")
    time.sleep(0.4)
    again = create(sdk, "k-pruned")
    return {"first": first.id, "again": again.id, "again_replayed": replayed(again)}


def case_lost_answer():
    # The provider commits and holds its answer past the SDK's timeout; the
    # SDK re-sends under the same key and gets the saved answer.
    intent = create(client(retries=1, timeout=0.5), "k-lost")
    return {"id": intent.id, "replayed": replayed(intent)}


def case_declined():
    sdk = client()
    out = {}
    for attempt in ("first", "again"):
        try:
            create(sdk, "k-declined")
            out[attempt] = {"raised": None}
        except stripe.StripeError as error:
            out[attempt] = failure(error)
    return out


CASES = {
    "replay": case_replay,
    "saved-500": case_saved_500,
    "changed-params": case_changed_params,
    "in-flight": case_in_flight,
    "pruned": case_pruned,
    "lost-answer": case_lost_answer,
    "declined": case_declined,
}

if __name__ == "__main__":
    if CASE not in CASES:
        sys.exit(f"unknown case '{CASE}'. Choose from: {', '.join(CASES)}")
    print(json.dumps(CASES[CASE]()))
