"""The generated training corpus of the tiny tokenizer (seeded; no hub): English sentences,
arithmetic, code, CJK and chat turns, and its digest (part of the recipe digest)."""

from __future__ import annotations

import functools
import hashlib
import random
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from specperf.testkit.models.recipe import TinyRecipe

_WORD_TEXT = (
    "the a an of to in and or but for with on at by from as is are was were be been being it "
    "this that these those there here what which who whom whose when where why how not no yes "
    "all any some many much more most few less least each every other another such same own "
    "model token tokens speed latency throughput request requests server engine draft target "
    "accept accepted acceptance length rate decode decoding prefill cache memory batch step "
    "steps verify verified sample sampling greedy temperature prompt prompts answer answers "
    "question questions write explain describe summarize translate compute solve prove list "
    "story poem essay letter email report article review plan recipe guide summary example "
    "number numbers sum total price cost time hours minutes days weeks years people students "
    "apples books cars trees cities rivers countries water energy light sound music art "
    "science history math physics chemistry biology economics language languages code python "
    "function class method variable value values list dict string integer float return loop "
    "if else while import def print range len append sort key keys file files data table "
    "good better best bad worse new old small large big little long short high low fast slow "
    "first second third last next previous early late open close start stop run runs ran "
    "make made take took give gave find found think thought know knew see saw use used work "
    "worked call called try tried ask asked need needed want wanted feel felt become became "
    "leave left put keep kept let begin began seem seemed help helped show showed hear heard "
    "play played move moved live lived believe believed hold held bring brought happen "
    "happened provide provided sit sat stand stood lose lost pay paid meet met include "
    "included continue continued set learn learned change changed lead led understand "
    "understood watch watched follow followed create created speak spoke read spend spent "
    "grow grew offer offered remember remembered love loved consider considered appear "
    "appeared buy bought wait waited serve served die died send sent expect expected build "
    "built stay stayed fall fell cut reach reached kill remain remained suggest suggested "
    "raise raised pass passed sell sold require required decide decided pull pulled "
    "world life hand part child eye woman man place case week company system program "
    "government point home room mother area money story fact month lot right study book job "
    "word business issue side kind head house service friend father power hour game line end "
    "member law car city community name president team minute idea kid body information back "
    "parent face others level office door health person war party result change morning "
    "reason research girl guy moment air teacher force education step therefore however "
    "because although while since unless until before after during between among through "
    "carefully quickly simply clearly exactly roughly probably certainly usually often"
)
_WORDS = _WORD_TEXT.split()
_CJK = (
    "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动"
    "同工也能下过子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自"
    "二理起小物现实加量都两体制机当使点从业本去把性好应开它合还因由其些然前外天政四日"
    "那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变"
    "条只没结解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总"
    "次品式活设及管特件长求老头基资边流路级少图山统接知较将组见计别她手角期根论运农指"
    "几九区强放决西被干做必战先回则任取据处理"
)


def _corpus(recipe: TinyRecipe) -> list[str]:
    """Sentences, chat turns, code and arithmetic from a seeded generator (English, some CJK)."""
    rng = random.Random(recipe.seed)
    lines: list[str] = []
    for i in range(recipe.corpus_sentences):
        kind = i % 10
        if kind < 6:
            words = [rng.choice(_WORDS) for _ in range(rng.randint(5, 18))]
            s = " ".join(words)
            lines.append(s[0].upper() + s[1:] + rng.choice([".", ".", "?", "!", ":"]))
        elif kind == 6:
            a, b = rng.randint(0, 999), rng.randint(0, 999)
            lines.append(f"Q: What is {a} + {b}? A: {a} + {b} = {a + b}. The answer is {a + b}.")
        elif kind == 7:
            name, var = rng.choice(_WORDS), rng.choice(_WORDS)
            lines.append(
                f"def {name}_{i % 97}({var}):\n    for i in range(len({var})):\n"
                f"        if {var}[i] > {rng.randint(0, 50)}:\n            return {var}[i]\n"
                f"    return None\n"
            )
        elif kind == 8:
            lines.append("".join(rng.choice(_CJK) for _ in range(rng.randint(6, 24))) + "。")
        else:
            q = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(4, 10)))
            a = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(6, 20)))
            lines.append(
                f"<|im_start|>user\n{q}?<|im_end|>\n<|im_start|>assistant\n"
                f"<think>\n\n</think>\n\n{a}.<|im_end|>\n"
            )
    return lines


@functools.lru_cache(maxsize=16)
def corpus_digest(recipe: TinyRecipe) -> str:
    return hashlib.sha256("\n".join(_corpus(recipe)).encode()).hexdigest()[:16]
