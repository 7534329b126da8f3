#!/usr/bin/python3
"""Generate Burst's demo datasets: a support-ticket classifier and a small DPO set.

Deterministic: every random choice comes from random.Random with a fixed seed,
so running the script twice writes byte-identical files.

Writes (paths relative to the repository root):
    examples/support/train.jsonl                   1200 chat examples (200 per label)
    examples/support/valid.jsonl                    204 chat examples (34 per label)
    examples/support/train_prompt_completion.jsonl   54 {"prompt","completion"} examples
    examples/support/text.jsonl                      24 {"text"} examples
    examples/dpo/train.jsonl                         60 {"prompt","chosen","rejected"} pairs
    examples/dpo/train_openai.jsonl                  24 OpenAI-style DPO pairs

The train and valid splits are built from DISJOINT template banks: different
sentence templates, openings, closings, detail sentences and slot values
(products, plans, names, order-number format, error-code format, ...), so the
held-out split measures generalisation, not memorisation of surface strings.
The prompt-completion, text and DPO files use the train banks only, so nothing
in them leaks the valid wording either.

Usage:
    /usr/bin/python3 scripts/make_support_data.py [--root DIR]
"""

import argparse
import json
import os
import random
import re
import sys

SEED = 20240611
LABELS = ["billing", "technical", "account", "shipping", "refund", "feedback"]
SYSTEM = ("Classify the support ticket into one of: "
          "billing, technical, account, shipping, refund, feedback.")

N_TRAIN_PER_LABEL = 200
N_VALID_PER_LABEL = 34
N_PROMPT_COMPLETION_PER_LABEL = 9
N_TEXT_PER_LABEL = 4
N_DPO = 60
N_DPO_OPENAI = 24
MIN_WORDS = 15
MAX_WORDS = 50


# --------------------------------------------------------------------------
# Slot values.  Callables take the rng; lists are sampled uniformly.
# --------------------------------------------------------------------------

def _train_order(rng):
    return "#%d" % rng.randint(10000, 99999)


def _valid_order(rng):
    return "%s-%d" % (rng.choice(["ORD", "PO", "SO"]), rng.randint(100000, 999999))


def _train_error(rng):
    return "E%d" % rng.randint(100, 999)


def _valid_error(rng):
    return "0x%04X" % rng.randint(0x1000, 0xFFFF)


def _train_invoice(rng):
    return "INV-%d" % rng.randint(1000, 9999)


def _valid_invoice(rng):
    return "no. %d/%d" % (rng.randint(100, 999), rng.choice([23, 24]))


TRAIN_SLOTS = {
    "product": ["wireless earbuds", "standing desk", "coffee grinder", "yoga mat", "smart watch",
                "laptop backpack", "desk lamp", "blender", "running shoes", "phone case",
                "mechanical keyboard", "air purifier", "water bottle", "robot vacuum"],
    "plan": ["Pro", "Premium", "Family", "Basic"],
    "app": ["mobile", "desktop", "Android", "iOS"],
    "device": ["iPhone 13", "Android phone", "Windows laptop", "iPad", "Chromebook", "Samsung Galaxy S21"],
    "browser": ["Chrome", "Firefox"],
    "carrier": ["UPS", "FedEx"],
    "country": ["Canada", "Germany", "Australia", "Japan", "Brazil"],
    "city": ["Lagos", "Moscow", "Sao Paulo", "Manila"],
    "day": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"],
    "month": ["January", "February", "March", "April", "May", "June"],
    "feature": ["calendar", "reporting", "search", "dashboard", "tagging"],
    "payment": ["Visa card", "Mastercard", "PayPal account", "debit card"],
    "name": ["Sarah", "James", "Priya", "Tom", "Maria", "Ahmed", "Linda", "Kevin", "Yuki", "Carlos",
             "Emma", "David", "Fatima", "Ben"],
    "agent": ["Jessica", "Mike", "Olivia", "Raj"],
    "n": ["two", "three", "four", "five", "six"],
    "currency": ["$"],
    "order": _train_order,
    "errcode": _train_error,
    "invoice": _train_invoice,
}

VALID_SLOTS = {
    "product": ["bluetooth speaker", "office chair", "espresso machine", "hiking boots", "tablet stand",
                "rice cooker", "winter jacket", "webcam", "electric kettle", "gaming mouse",
                "camping tent", "hair dryer"],
    "plan": ["Plus", "Business", "Starter", "Team"],
    "app": ["phone", "web", "tablet"],
    "device": ["Pixel 7", "MacBook Air", "Galaxy Tab", "Linux desktop", "Surface Pro", "OnePlus phone"],
    "browser": ["Safari", "Edge", "Brave"],
    "carrier": ["DHL", "USPS", "the postal service", "the courier"],
    "country": ["Norway", "Mexico", "Ireland", "South Korea", "Kenya"],
    "city": ["Jakarta", "Lima", "Bucharest", "Hanoi"],
    "day": ["the 3rd", "the 12th", "the 21st", "Saturday", "Sunday"],
    "month": ["July", "August", "September", "October", "November", "December"],
    "feature": ["budgeting", "playlist", "photo editing", "timeline", "offline mode"],
    "payment": ["Amex", "Apple Pay", "bank transfer", "gift card"],
    "name": ["Olga", "Marcus", "Ingrid", "Kofi", "Hannah", "Diego", "Mei", "Liam", "Noor", "Pavel"],
    "agent": ["Daniela", "Steve", "Aisha"],
    "n": ["several", "nine", "ten", "a few"],
    "currency": ["EUR ", "GBP ", "$"],
    "order": _valid_order,
    "errcode": _valid_error,
    "invoice": _valid_invoice,
}

# --------------------------------------------------------------------------
# Template banks.  "core" carries the category; "detail" is an optional second
# sentence that also belongs to the category; "neutral" details, openings and
# closings carry no category signal.
# --------------------------------------------------------------------------

TRAIN_BANK = {
    "openings": ["Hi,", "Hello,", "Hi there,", "Hello support team,", "Good morning,", "Hey,",
                 "Dear support,", "Hi team,", "", "", ""],
    "closings": ["Thanks!", "Thank you.", "Thanks in advance.", "Please help.",
                 "Any help is appreciated.", "Regards, {name}", "Thanks, {name}",
                 "Thank you for your time.", "Hope you can sort this out quickly.", "", ""],
    "neutral": ["My order number is {order}.", "I've been a customer for years.",
                "I tried calling but the line was busy.", "This is the second time I'm writing about this.",
                "I'm writing from my work email."],
    "core": {
        "billing": [
            "I was charged twice for my {plan} subscription this month.",
            "My invoice for {month} shows {amount} but my {plan} plan is supposed to cost {amount2}.",
            "There is a charge of {amount} on my credit card statement that I don't recognize.",
            "Why did my monthly price go up to {amount} without any notice?",
            "My credit card keeps getting declined when I try to pay for the {plan} plan, even though it works everywhere else.",
            "Can you send me a proper VAT invoice for order {order}? I need it for my company expenses.",
            "I was billed for the annual plan but I only signed up for the monthly one.",
            "The payment for invoice {invoice} went through twice on {day}.",
            "I need to update the billing address that is printed on my invoices.",
            "I'm being charged sales tax on invoice {invoice} even though our organisation is tax exempt.",
            "You charged me {amount} for the {product} but the price on the checkout page was {amount2}.",
            "I'd like to change the payment method on file from my {payment} to a different card.",
            "My bill this month is {amount}, which is way more than the usual {amount2}.",
            "I was charged a late payment fee but I paid invoice {invoice} on time.",
            "Why is there an extra fee on my last bill? Nobody told me about it.",
        ],
        "technical": [
            "The {app} app crashes every time I open the settings page on my {device}.",
            "I keep getting error code {errcode} when I try to export my data.",
            "Since the last update the dashboard takes forever to load and sometimes shows a blank screen.",
            "Sync between my phone and my laptop stopped working, changes I make on one never appear on the other.",
            "Push notifications are not coming through on my {device} even though they are turned on.",
            "The search bar returns zero results even for items I know exist.",
            "Your API returns a 500 error whenever I call the orders endpoint.",
            "The upload button does nothing when I click it in {browser}.",
            "Video playback freezes after a few seconds in the {app} app.",
            "The app won't install on my {device}, it says the device is incompatible.",
            "The {app} app is stuck on the loading spinner and never gets past the splash screen.",
            "Every time I try to attach a file I get error {errcode} and the page reloads.",
            "The export to PDF feature produces an empty file with no content in it.",
            "The app is really glitchy after the latest update, buttons flicker and menus disappear.",
            "The {app} app closes by itself whenever I rotate my {device}.",
        ],
        "account": [
            "I forgot my password and the reset email never arrives.",
            "My account got locked after too many failed login attempts.",
            "How do I change the email address on my account? My old one is no longer active.",
            "I want to delete my account and all the personal data you have on me.",
            "I lost my phone and now I can't get past the two-factor authentication step to log in.",
            "I think someone else logged into my account, I got a security alert from {city}.",
            "I'd like to change my username, is that possible?",
            "Can I merge my two accounts into one? I accidentally signed up twice.",
            "I can't log in, it keeps saying my username does not exist.",
            "Please add my colleague as a second user on my account.",
            "I want to turn off two-factor authentication on my account.",
            "My account says it has been deactivated and I don't know why.",
            "I'd like to update the photo on my profile but the option is missing.",
            "I can't sign in on the website, it says my credentials are invalid.",
        ],
        "shipping": [
            "My order {order} was supposed to arrive on {day} but it still hasn't shown up.",
            "The tracking number for my {product} hasn't updated in {n} days.",
            "Can I change the delivery address for order {order}? I'm moving next week.",
            "{carrier} marked my package as delivered but there is nothing at my door.",
            "Do you ship to {country}, and how long does delivery usually take?",
            "My parcel with the {product} has been stuck in customs for {n} days.",
            "Can I upgrade order {order} to express delivery so it arrives before the weekend?",
            "The delivery driver left my package with a neighbour I don't know.",
            "My {product} was shipped to my old address instead of the new one.",
            "The estimated delivery date for my {product} keeps getting pushed back.",
            "Only part of my order {order} arrived, the {product} is still in transit.",
            "Has order {order} been dispatched yet? The courier has no record of it.",
        ],
        "refund": [
            "I returned the {product} two weeks ago and I still haven't received my refund.",
            "I'd like a refund for order {order}, the item was not as described.",
            "How long does it take for a refund to show up on my card?",
            "I cancelled my {plan} subscription within the 14-day window, can I get a full refund?",
            "Please refund the {amount} I paid for the {product}, I never used it.",
            "Your policy says full refund within 30 days and I'm only on day 12 with the {product}.",
            "I only got a partial refund of {amount2} but I should have gotten the full {amount}.",
            "The {product} arrived broken and I want a refund rather than a replacement.",
            "I was promised a refund for order {order} by email but nothing has happened since.",
            "Can you refund me for the {product}? I sent the parcel back with the prepaid return label.",
            "My refund request for order {order} was rejected and I don't understand why.",
            "Will I be reimbursed for the return postage on the {product} as well?",
        ],
        "feedback": [
            "Just wanted to say the new {feature} feature is fantastic, great job to the team.",
            "It would be great if you added a dark mode to the app.",
            "Your support agent {agent} was incredibly helpful yesterday, thank you so much.",
            "I love the product but the new layout is harder to navigate, please consider bringing back the old menu.",
            "Suggestion: let us export reports as CSV files.",
            "I've been a customer for {n} years and this is the best update yet.",
            "The {product} I bought is excellent quality, I've already recommended it to friends.",
            "Feature request: it would be useful to share the {feature} view with my team.",
            "Not a complaint, just an idea: a weekly summary email would be really nice.",
            "The new onboarding tutorial is very clear, it made getting started easy.",
            "I think the font in the new design is too small, it would be nice to make it bigger.",
            "Big kudos to the design team, the new look is really polished.",
        ],
    },
    "detail": {
        "billing": ["The charge appeared on {day}.", "I've attached a screenshot of my bank statement.",
                    "Please correct the invoice and send me an updated copy.",
                    "The amount in question is {amount}.", "I'd like an explanation of the charges."],
        "technical": ["I'm using the latest version on {device}.", "I already tried reinstalling and clearing the cache.",
                      "It worked fine until yesterday.", "Restarting the {device} didn't help.",
                      "I can send you a screen recording of the bug."],
        "account": ["My username is {name}{n_digits}.", "I've checked my spam folder already.",
                    "I still have access to my old phone number.", "I need access urgently for work.",
                    "I can verify my identity if needed."],
        "shipping": ["The tracking page just says in transit.", "I paid for two-day shipping.",
                     "It's a birthday present so I need it soon.", "The shipment is coming via {carrier}.",
                     "I was home all day and nobody knocked."],
        "refund": ["I'd prefer the money back on my original payment method.", "The return was received on {day} according to tracking.",
                   "I have the receipt for {amount}.", "I don't want store credit, just my money back.",
                   "The item is still in its original packaging."],
        "feedback": ["Keep up the good work.", "Just my two cents.", "Otherwise I'm really happy with the service.",
                     "No reply needed.", "I think many users would appreciate it."],
    },
}

VALID_BANK = {
    "openings": ["Greetings,", "Good afternoon,", "Hey folks,", "To whom it may concern,", "Hiya,",
                 "Evening,", "Dear customer care,", "Morning all,", "", ""],
    "closings": ["Cheers.", "Much appreciated.", "Grateful for any assistance.", "Kind regards, {name}",
                 "Best, {name}", "Looking forward to your answer.", "Talk soon, {name}",
                 "Hoping to hear back shortly.", "", ""],
    "neutral": ["Reference for my purchase: {order}.", "I'm contacting you from my partner's laptop.",
                "Your chat widget wasn't working so I'm emailing instead.", "Sorry if this is the wrong channel."],
    "core": {
        "billing": [
            "My card got billed two times for the same {plan} membership.",
            "The statement from {month} lists a charge of {amount} that nobody in our house made.",
            "Could you explain why my renewal price jumped from {amount2} to {amount}?",
            "My {payment} payment gets rejected every time, the transaction could not be authorised.",
            "I need a tax invoice with our company VAT number for invoice {invoice}.",
            "Your company charged {amount} to my bank on {day} and I have no idea what that fee is for.",
            "The total on my latest bill doesn't match the {plan} price I agreed to.",
            "For future bills please take the payment from {payment} instead of the current card.",
            "I ended up on yearly billing although I picked the month-to-month option.",
            "Why does invoice {invoice} include an extra charge of {amount}?",
        ],
        "technical": [
            "Whenever I launch the {app} app on my {device} it closes itself after a few seconds, looks like a crash.",
            "I see an error message saying unexpected failure {errcode} whenever I try to print a report.",
            "Pages in the web app are really sluggish since the update and half the buttons don't respond.",
            "Edits I make in the app on my tablet never sync to my desktop any more.",
            "The barcode scanner inside the app only shows a black screen.",
            "{browser} shows a loading wheel forever after I press save, looks like a bug.",
            "Ever since the newest update came out, the {app} app freezes when I switch tabs.",
            "Images won't render in the {app} app, I just get grey boxes with error {errcode}.",
            "The software throws a bug report dialog each time I open a document on my {device}.",
            "Audio cuts out during calls in the {app} app, it's been glitchy since the last update.",
        ],
        "account": [
            "The link to set a new password has expired every single time I click it.",
            "I'm shut out of my account after typing the wrong password a few times.",
            "Please swap the email on my account for a new one; the old mailbox is closed.",
            "Please close my account permanently and erase everything you store about me.",
            "My authenticator codes were on my old handset and now I can't verify it's me when I log in.",
            "There was a sign-in to my account from {city} that definitely wasn't me, please secure it.",
            "How can I rename the display name on my account profile?",
            "I have two separate accounts registered under different emails and want them combined.",
            "Logging in fails with a message that no such username is registered.",
            "My login was suspended out of nowhere and I can't get back into my account.",
        ],
        "shipping": [
            "Purchase {order} was due for delivery {day} and there's still no sign of the parcel.",
            "The tracking website says label created for my {product} and nothing since.",
            "I need the package redirected to my office rather than my home address.",
            "{carrier} claims the parcel was delivered but my porch is empty.",
            "Do you offer delivery to {country}, and what's the typical shipping time?",
            "The parcel containing my {product} has been held at border clearance for {n} days.",
            "Could my items be shipped by overnight courier instead of standard post?",
            "The courier handed my parcel to the building next door and they deny having it.",
            "The dispatch date for my {product} has slipped again, when will it actually be shipped?",
            "Half of purchase {order} was delivered but the {product} is missing from the box.",
        ],
        "refund": [
            "I mailed the {product} back at the start of the month and my refund hasn't come through yet.",
            "Could you reimburse me for purchase {order}? It was nothing like the photos, I want my money back.",
            "When will the refund for my returned {product} reach my bank?",
            "I'd like the {amount} I spent on the {product} refunded, I changed my mind.",
            "Only part of my refund came through, I'm still owed {amount} for the return.",
            "I'm asking for my money back on the {plan} membership, I cancelled on the second day.",
            "The {product} was defective out of the box, I want my money refunded, not an exchange.",
            "Your agent confirmed my refund for {order} weeks ago but nothing has reached my bank.",
            "Why was my request to get my money back for {order} declined?",
            "The {product} is back at your warehouse, please process the refund.",
        ],
        "feedback": [
            "Kudos to whoever redesigned the {feature} feature, it's a joy to use.",
            "Small suggestion: please let me schedule reminders for later in the week.",
            "{agent} from your help desk went above and beyond for me, please pass on my thanks.",
            "Honestly the older menu was easier to find things in, maybe offer it as an option?",
            "Would be great to have a home screen widget for quick access.",
            "Your {feature} tool has made my week so much easier, love it.",
            "Idea for the roadmap: keyboard shortcuts for the most common actions.",
            "My honest opinion: the colours in the latest redesign are a bit harsh on the eyes.",
            "Really impressed with how well made the {product} is, love it and well worth the money.",
            "Just sharing some praise, the walkthrough for new users is superb.",
        ],
    },
    "detail": {
        "billing": ["Please fix the bill and resend it.", "A copy of the bank record is attached.",
                    "Our accountant needs the corrected invoice before month end."],
        "technical": ["Reinstalling the app made no difference.", "I'm on the current release on {device}.",
                      "Happy to share logs if that helps with debugging."],
        "account": ["I can prove I'm the owner of the account.", "No password email turned up in my junk mail either.",
                    "I rely on this login for my job."],
        "shipping": ["I paid extra for quick dispatch.", "It is meant to be a gift, so the delivery date matters.",
                     "The package is with {carrier}."],
        "refund": ["Please send the money to the card I paid with.", "A voucher won't work for me, I want a refund.",
                   "The return tracking shows it was delivered to you."],
        "feedback": ["Thanks for listening.", "Overall a great experience.", "Nothing urgent, just a thought."],
    },
}


# Closings that only make sense when something is wrong (not used for feedback).
PROBLEM_CLOSINGS = {"Please help.", "Any help is appreciated.", "Hope you can sort this out quickly.",
                    "Grateful for any assistance.", "Hoping to hear back shortly."}


# --------------------------------------------------------------------------
# Generation
# --------------------------------------------------------------------------

_SLOT = re.compile(r"\{(\w+)\}")


def fill(template, rng, slots, chosen):
    """Fill {slot} placeholders; a slot used twice in one ticket keeps its value."""
    def repl(m):
        key = m.group(1)
        if key == "n_digits":
            return str(rng.randint(1, 99))
        if key not in chosen:
            val = slots[key]
            chosen[key] = val(rng) if callable(val) else rng.choice(val)
        return chosen[key]
    return _SLOT.sub(repl, template)


def pick_amounts(rng, symbols):
    """Two prices in one currency: amount > amount2 (e.g. 'charged X, expected Y')."""
    sym = rng.choice(symbols)
    hi = rng.randint(2000, 38000)
    lo = int(hi * rng.uniform(0.3, 0.8))
    fmt = lambda c: "%s%d.%02d" % (sym, c // 100, c % 100)
    return fmt(hi), fmt(lo)


# Words that keep their capital letter after a greeting such as "Hi,".
_KEEP_CAPS = {"I", "I'm", "I've", "I'd", "I'll"}


def join_after_greeting(opening, template, sentence):
    """'Hi,' + 'The app ...' -> 'Hi, the app ...' (names, 'I' and slot-initial templates keep caps)."""
    first = template.split(" ", 1)[0]
    if first in _KEEP_CAPS or first.startswith("{") or first[1:2].isupper():
        return opening + " " + sentence
    return opening + " " + sentence[0].lower() + sentence[1:]


def add_typo(text, rng):
    """Introduce one realistic typo (or sloppy casing)."""
    kind = rng.randrange(4)
    if kind == 0:
        return text.lower()
    words = text.split(" ")
    idxs = [i for i, w in enumerate(words) if w.isalpha() and len(w) > 4]
    if not idxs:
        return text
    i = rng.choice(idxs)
    w = words[i]
    j = rng.randrange(1, len(w) - 2)
    if kind == 1:    # swap two adjacent letters
        w = w[:j] + w[j + 1] + w[j] + w[j + 2:]
    elif kind == 2:  # drop a letter
        w = w[:j] + w[j + 1:]
    else:            # double a letter
        w = w[:j] + w[j] + w[j:]
    words[i] = w
    return " ".join(words)


def make_ticket(rng, bank, slots, label):
    """Return (text, info) where info holds the customer name (or None) and core template."""
    while True:
        chosen = {}
        chosen["amount"], chosen["amount2"] = pick_amounts(rng, slots["currency"])
        core_t = rng.choice(bank["core"][label])
        core = fill(core_t, rng, slots, chosen)
        opening = rng.choice(bank["openings"])
        parts = [join_after_greeting(opening, core_t, core) if opening else core]
        r = rng.random()
        if r < 0.45:
            parts.append(fill(rng.choice(bank["detail"][label]), rng, slots, chosen))
        elif r < 0.60 and label != "feedback":  # neutral details read like complaints
            parts.append(fill(rng.choice(bank["neutral"]), rng, slots, chosen))
        closings = bank["closings"]
        if label == "feedback":
            closings = [c for c in closings if c not in PROBLEM_CLOSINGS]
        closing = rng.choice(closings)
        if closing:
            parts.append(fill(closing, rng, slots, chosen))
        text = " ".join(parts)
        if rng.random() < 0.08:
            text = add_typo(text, rng)
        n = len(text.split())
        if MIN_WORDS <= n <= MAX_WORDS:
            name = chosen.get("name") if "{name}" in closing else None
            return text, {"name": name, "core": core_t}


def make_split(rng, bank, slots, per_label, exclude=frozenset()):
    rows = []
    seen = set(exclude)
    for label in LABELS:
        count = 0
        while count < per_label:
            text, _ = make_ticket(rng, bank, slots, label)
            if text in seen:
                continue
            seen.add(text)
            rows.append((text, label))
            count += 1
    rng.shuffle(rows)
    return rows


def chat_record(text, label):
    return {"messages": [{"role": "system", "content": SYSTEM},
                         {"role": "user", "content": text},
                         {"role": "assistant", "content": label}]}


# --------------------------------------------------------------------------
# DPO replies
# --------------------------------------------------------------------------

TEAM = {
    "billing": ("billing", "our billing team", "review the charges and correct your invoice if anything is wrong"),
    "technical": ("technical", "our technical support engineers", "look into the problem and help you get things working again"),
    "account": ("account", "our account security team", "help you regain access and update your account settings safely"),
    "shipping": ("shipping", "our delivery team", "check with the carrier and give you an update on your package"),
    "refund": ("refund", "our refunds team", "check the status of your refund and make sure the money is returned"),
    "feedback": ("feedback", "our product team", "read your comments and consider them for future improvements"),
}

CHOSEN_TEMPLATES = [
    "{greet} thank you for contacting us, and I'm sorry for the trouble. This is {a_cat} request, so I have passed it to {team}, who will {action}. You should hear back within one business day.",
    "{greet} thanks for reaching out. I've classified your message as {cat} and forwarded it to {team}. They will {action}, and we'll keep you updated by email.",
    "{greet} I appreciate you letting us know. Your ticket falls under {cat}, and {team} will {action}. Please reply to this message if there's anything else we can help with.",
]

CURT_REPLIES = [
    "Not our problem.",
    "Read the FAQ.",
    "We can't help with that.",
    "Ticket closed.",
    "Try again later.",
    "Whatever, someone will get to it eventually.",
]

FEEDBACK_CHOSEN_TEMPLATES = [
    "{greet} thank you so much for taking the time to write to us. I've logged this as {cat} and shared it with {team}, who will {action}. We really value hearing from customers like you.",
]


def _article(word):
    return ("an " if word[0] in "aeiou" else "a ") + word


def _greet(name):
    return "Hi %s," % name if name else "Hello,"


def chosen_reply(rng, label, name):
    cat, team, action = TEAM[label]
    templates = FEEDBACK_CHOSEN_TEMPLATES if label == "feedback" else CHOSEN_TEMPLATES
    return rng.choice(templates).format(greet=_greet(name), cat=cat, a_cat=_article(cat), team=team, action=action)


def rejected_reply(rng, label, name):
    kind = rng.randrange(3)
    if kind == 0:  # curt
        return rng.choice(CURT_REPLIES)
    wrong = rng.choice([l for l in LABELS if l != label])
    cat, team, action = TEAM[wrong]
    if kind == 1:  # polite but wrong category
        return rng.choice(CHOSEN_TEMPLATES).format(greet=_greet(name), cat=cat, a_cat=_article(cat), team=team, action=action)
    return "This is %s issue. Send it to %s." % (_article(cat), team.replace("our ", "the "))  # curt and wrong


DPO_INSTRUCTION = ("Reply to this customer support ticket. Be polite and say which category it belongs to "
                   "(billing, technical, account, shipping, refund, feedback).\n\nTicket: ")


def make_dpo(rng, n, exclude):
    rows = []
    seen = set(exclude)
    i = 0
    while len(rows) < n:
        label = LABELS[i % len(LABELS)]
        text, info = make_ticket(rng, TRAIN_BANK, TRAIN_SLOTS, label)
        if text in seen:
            continue
        seen.add(text)
        i += 1
        rows.append({"prompt": DPO_INSTRUCTION + text,
                     "chosen": chosen_reply(rng, label, info["name"]),
                     "rejected": rejected_reply(rng, label, info["name"])})
    rng.shuffle(rows)
    return rows


def openai_dpo(row):
    return {"input": {"messages": [{"role": "user", "content": row["prompt"]}]},
            "preferred_output": [{"role": "assistant", "content": row["chosen"]}],
            "non_preferred_output": [{"role": "assistant", "content": row["rejected"]}]}


# --------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------

def write_jsonl(path, records):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for rec in records:
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    print("%-50s %5d lines" % (os.path.relpath(path), len(records)))


def check_disjoint():
    """The valid banks must not share template sentences with the train banks."""
    for key in ("openings", "closings", "neutral"):
        common = set(TRAIN_BANK[key]) & set(VALID_BANK[key]) - {""}
        assert not common, (key, common)
    for label in LABELS:
        for key in ("core", "detail"):
            common = set(TRAIN_BANK[key][label]) & set(VALID_BANK[key][label])
            assert not common, (key, label, common)
    for key in ("product", "plan", "device", "browser", "carrier", "country", "city", "month",
                "feature", "payment", "name", "agent"):
        common = set(TRAIN_SLOTS[key]) & set(VALID_SLOTS[key])
        assert not common, (key, common)


def main(argv=None):
    ap = argparse.ArgumentParser(description="Generate the support-ticket and DPO demo datasets.")
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."),
                    help="repository root (default: the parent of scripts/)")
    args = ap.parse_args(argv)
    root = os.path.normpath(args.root)
    support = os.path.join(root, "examples", "support")
    dpo = os.path.join(root, "examples", "dpo")

    check_disjoint()

    # Independent generators per output, so editing one file's generator does
    # not reshuffle the others.
    valid = make_split(random.Random(SEED + 2), VALID_BANK, VALID_SLOTS, N_VALID_PER_LABEL)
    valid_texts = {t for t, _ in valid}
    train = make_split(random.Random(SEED + 1), TRAIN_BANK, TRAIN_SLOTS, N_TRAIN_PER_LABEL,
                       exclude=valid_texts)
    assert not valid_texts & {t for t, _ in train}

    used = valid_texts | {t for t, _ in train}
    pc = make_split(random.Random(SEED + 3), TRAIN_BANK, TRAIN_SLOTS, N_PROMPT_COMPLETION_PER_LABEL,
                    exclude=used)
    used |= {t for t, _ in pc}
    txt = make_split(random.Random(SEED + 4), TRAIN_BANK, TRAIN_SLOTS, N_TEXT_PER_LABEL, exclude=used)
    used |= {t for t, _ in txt}
    dpo_rows = make_dpo(random.Random(SEED + 5), N_DPO + N_DPO_OPENAI, exclude=used)

    write_jsonl(os.path.join(support, "train.jsonl"), [chat_record(t, l) for t, l in train])
    write_jsonl(os.path.join(support, "valid.jsonl"), [chat_record(t, l) for t, l in valid])
    write_jsonl(os.path.join(support, "train_prompt_completion.jsonl"),
                [{"prompt": SYSTEM + "\n\nTicket: " + t + "\nCategory:", "completion": " " + l}
                 for t, l in pc])
    write_jsonl(os.path.join(support, "text.jsonl"),
                [{"text": "Ticket: " + t + "\nCategory: " + l} for t, l in txt])
    write_jsonl(os.path.join(dpo, "train.jsonl"), dpo_rows[:N_DPO])
    write_jsonl(os.path.join(dpo, "train_openai.jsonl"), [openai_dpo(r) for r in dpo_rows[N_DPO:]])
    return 0


if __name__ == "__main__":
    sys.exit(main())
