#!/usr/bin/env python3
"""Make a synthetic meeting for `sarcasmd bench`: speaker turns of 1-3 sentences spoken
by espeak-ng with several voices and speaking rates, one WAV per turn and a .txt beside
it with what was said (the bench's word-error reference). The bench joins the turns with
silent gaps. Deterministic for a given --seed. Standard library only.

  python3 scripts/espeak_meeting.py --out /tmp/meeting --minutes 10
  target/release/sarcasmd bench /tmp/meeting --json /tmp/meeting-bench.json
"""
import argparse
import os
import random
import subprocess
import sys
import wave

SENTENCES = [
    "Good morning everyone, let's look at the quarterly numbers.",
    "Oh great, another meeting that could have been an email.",
    "The server went down again during the demo.",
    "Wow, what a surprise, I am totally shocked.",
    "Thanks, the report is ready and I sent it to the team.",
    "Sure, because the last deadline worked out so well for us.",
    "Can we move the review to Thursday afternoon?",
    "I love it when the build breaks five minutes before the release.",
    "The customer asked for a second copy of the invoice.",
    "Brilliant idea, let's rewrite everything from scratch again.",
    "We need two more people on the support rotation next month.",
    "Oh yes, I just adore spending my weekend fixing spreadsheets.",
    "The new office chairs arrive on Monday.",
    "Fantastic, the printer is jammed again, what a lovely start to the day.",
    "Please send me the slides before lunch.",
    "Of course the budget was approved, right after the project ended.",
    "The test coverage went up by four percent this sprint.",
    "Nice of you to join us, the meeting started twenty minutes ago.",
    "I will update the ticket and assign it to the backend team.",
    "Perfect, another password policy, that is exactly what we needed.",
    "The training session is booked for the third of next month.",
    "Sure, I will just work through the night, no problem at all.",
    "Our latency dropped after we moved the cache closer to the users.",
    "What a shock, the vendor missed the delivery date again.",
    "Let's take a five minute break and continue with the roadmap.",
    "Great, so the quick fix took three weeks.",
    "The dashboard now shows the error rate for every region.",
    "Oh wonderful, the coffee machine is broken and it is only Monday.",
    "We should document the release process before Anna goes on leave.",
    "Yeah right, that plan will definitely work this time.",
    "The contract renewal needs a signature from legal.",
    "I am thrilled to hear we have a fourth reorganisation this year.",
    "Could you share your screen so we can see the graph?",
    "Clearly the best use of our time is another status meeting.",
    "The migration finished overnight without any data loss.",
    "Amazing, the client changed the requirements one day before launch.",
    "Let's agree on the agenda for the workshop next week.",
    "Oh sure, the intern can handle the production database alone.",
    "The sales figures for the north region look strong.",
    "How lovely, the video call froze right at the important part.",
    "I think we can close this item and move on.",
    "Well done, you managed to reply all to the whole company.",
    "The security audit found no critical issues.",
    "Splendid, the meeting room is double booked again.",
    "Please check the numbers in the appendix before we publish.",
    "Right, because nobody ever needs the old backups.",
    "We will hire two engineers for the data platform team.",
    "Oh good, another survey about how many surveys we get.",
    "The delivery trucks will leave the warehouse at six.",
    "Lucky us, the fire alarm test is during the board presentation.",
    "I sent the minutes of the last meeting this morning.",
    "That went well, only three outages this week.",
    "The project plan has three milestones before summer.",
    "Sure, let's add ten more features and keep the same deadline.",
    "Let me know if you need access to the shared drive.",
    "What could possibly go wrong with deploying on a Friday evening?",
    "The team lunch is at the Italian place across the street.",
    "Terrific, my laptop decided to update in the middle of the demo.",
    "We reduced the cloud bill by a fifth last quarter.",
    "Oh, I just love it when people talk during the whole presentation.",
]

VOICES = ["en-us", "en-gb", "en-us+m3", "en-gb+f2", "en-us+f3", "en-gb-x-rp"]


def espeak(text, voice, wpm, path):
    subprocess.run(["espeak-ng", "-v", voice, "-s", str(wpm), "-w", path, text], check=True)
    with wave.open(path) as w:
        return w.getnframes() / w.getframerate()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--minutes", type=float, default=10.0, help="speech to produce (gaps come on top)")
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    rng = random.Random(a.seed)
    total = 0.0
    turn = 0
    while total < a.minutes * 60:
        n = rng.choice([1, 1, 2, 2, 3])
        text = " ".join(rng.sample(SENTENCES, n))
        voice = rng.choice(VOICES)
        wpm = rng.randint(145, 180)
        base = os.path.join(a.out, f"turn_{turn:04d}")
        dur = espeak(text, voice, wpm, base + ".wav")
        if dur > 15.0 and n > 1:
            # Keep turns within 3-15 s, MuSAG's range of utterance lengths.
            os.remove(base + ".wav")
            continue
        with open(base + ".txt", "w") as f:
            f.write(text + "\n")
        total += dur
        turn += 1
    print(f"{turn} turns, {total / 60:.1f} min of speech in {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
