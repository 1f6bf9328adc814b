"""Synthetic Japanese news-style articles for the Japanese reference checkpoints.

No Japanese news corpus is installable offline, so articles are generated with faker's ja_JP
locale: 9 to 14 sentences, each a news-style frame (company announcements, press conferences,
local events, figures) filled with faker entities: people, companies, places, dates, numbers
and faker's own Japanese words. Like real news, the frames repeat across articles and the
specifics do not, so reproducing an article's continuation requires having memorized that article.
Deterministic for (n_articles, seed) and the installed faker version.
"""

from __future__ import annotations

import datetime
from functools import lru_cache

N_ARTICLES = 1000
SEED = 0
FIRST_DAY, LAST_DAY = datetime.date(2015, 1, 1), datetime.date(2024, 12, 31)

FRAMES = (
    "{date}、{company}の{person}社長は{place}で記者会見を開き、{word}事業への参入を発表した。",
    "同社によると、投資額はおよそ{number}億円で、{year}年までに{number2}人を新たに雇用する計画だ。",
    "{person}氏は「{word}の分野で地域に貢献したい」と述べた。",
    "{place}では{date}から{word}をテーマにした催しが開かれ、{number2}人が訪れた。",
    "{company}は{place}に新しい工場を建設し、{word}の生産を始めると明らかにした。",
    "関係者によると、{person}氏は{year}年に{company}に入社し、{word}部門の責任者を務めてきた。",
    "{place}の{person}市長は、{word}に関する条例案を{date}の議会に提出する方針を示した。",
    "調査では、回答者の{percent}パーセントが{word}について「関心がある」と答えた。",
    "{company}の売上高は前年比{percent}パーセント増の{number}億円となった。",
    "{person}さんは「{word}が好きで、毎週{place}に通っている」と話した。",
    "警察によると、{date}午後{hour}時ごろ、{place}の{word}付近で火災が発生した。",
    "{company}と{company2}は{date}、{word}の共同開発で合意したと発表した。",
    "専門家の{person}氏は「{word}の需要は今後も伸びる」と分析している。",
    "イベントは{date}まで{place}で開かれ、入場は無料となっている。",
)


@lru_cache(maxsize=1)
def japanese_articles(n_articles: int = N_ARTICLES, seed: int = SEED) -> list[tuple[str, str]]:
    """(id, text) pairs, deterministic for (n_articles, seed)."""
    from faker import Faker

    fake = Faker("ja_JP")
    fake.seed_instance(seed)

    def day() -> str:
        date = fake.date_between_dates(date_start=FIRST_DAY, date_end=LAST_DAY)
        return f"{date.month}月{date.day}日"

    articles = []
    for index in range(n_articles):
        company, person, place = fake.company(), fake.name().replace(" ", ""), fake.prefecture() + fake.city()
        sentences = []
        for frame_index in [0] + [fake.random_int(1, len(FRAMES) - 1) for _ in range(fake.random_int(8, 13))]:
            sentences.append(FRAMES[frame_index].format(
                date=day(), company=company, company2=fake.company(), person=person, place=place,
                word=fake.word(), number=fake.random_int(2, 900), number2=fake.random_int(10, 5000),
                year=fake.random_int(2025, 2035), percent=fake.random_int(3, 95), hour=fake.random_int(1, 11)))
            if fake.random_int(0, 2) == 0:  # a new person or place now and then, as articles do
                person, place = fake.name().replace(" ", ""), fake.prefecture() + fake.city()
        articles.append((f"ja-{index:04d}", "".join(sentences)))
    return articles
