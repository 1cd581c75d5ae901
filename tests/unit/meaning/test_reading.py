"""The request read as a person reads it (pipeline/meaning/reading.py `read`, pipeline/meaning/framing.py): the
subject as the request frames it, the kind of book that makes, who it is for and what it names; by rules, no model."""

from __future__ import annotations

import pytest

from pipeline.meaning.offensive import offensive_words
from pipeline.meaning.reading import read


@pytest.mark.parametrize(
    ("request_text", "subject", "kind"),
    [
        ("The history of the bicycle", "history of the bicycle", "history"),  # its frame is its subject
        (
            "The rise and fall of the Hanseatic League, told for general readers.",
            "rise and fall of the Hanseatic League",
            "history",
        ),  # noqa: E501
        (
            "Explain how new medicines are tested before they are approved, for readers with no science background.",
            "how new medicines are tested before they are approved",  # testing and approval, not medicines
            "process",
        ),
        ("How do tides work?", "how tides work", "workings"),
        ("How do I start a vegetable garden on clay soil?", "how to start a vegetable garden on clay soil", "practice"),
        ("What actually happens to my recycling?", "what happens to my recycling", "workings"),
        ("What should I know before adopting a rescue greyhound?", "adopting a rescue greyhound", "practice"),
        ("Teach me to build a dry stone wall.", "how to build a dry stone wall", "practice"),
        ("A hobbyist's guide to restoring antique clocks.", "restoring antique clocks", "practice"),
        ("A practical guide to pitching a tent in wind and rain.", "pitching a tent in wind and rain", "practice"),
        (
            "A handbook for new tower crane operators on building sites.",
            "tower crane operators on building sites",
            "role",
        ),  # noqa: E501
        (
            "Write a short guide for anglers on catching bass from the shore.",
            "catching bass from the shore",
            "practice",
        ),  # noqa: E501
        (
            "Could you write a short book answering this: how do migrating birds find their way?",
            "how migrating birds find their way",
            "workings",
        ),  # noqa: E501
        ("An introduction to public key cryptography.", "public key cryptography", "topic"),
    ],
)
def test_the_subject_is_read_as_the_request_frames_it(request_text, subject, kind):
    reading = read(request_text)
    assert (reading.subject, reading.kind) == (subject, kind)


def test_who_the_book_is_for_is_its_audience_and_never_a_concern():
    reading = read("Can you explain to a ten-year-old why the sky is blue?")
    assert reading.subject == "why the sky is blue" and reading.audience == ("a ten-year-old",)
    reading = read("Explain how a heat pump heats a house, for homeowners thinking of buying one.")
    assert reading.audience == ("homeowners thinking of buying one",) and not reading.concerns
    reading = read("A guide for parents whose teenager has just started driving.")
    assert reading.subject == "teenager has just started driving" and reading.audience == ("parents",)


@pytest.mark.parametrize(
    ("request_text", "subject", "audience"),
    [
        ("Hikers want a guide to surviving a night outdoors.", "surviving a night outdoors", "Hikers"),
        ("Python developers need a guide to packaging their code.", "packaging their code", "Python developers"),
        ("Write a chemistry book for AP students that runs from atoms to reactions.", "chemistry", "AP students"),
    ],
)
def test_a_request_that_names_its_readers_first_is_about_what_they_want(request_text, subject, audience):
    reading = read(request_text)
    assert reading.subject == subject and reading.audience == (audience,)


def test_a_stop_inside_an_initialism_or_a_name_ends_no_sentence():
    assert read("Write a textbook on U.S. history from colonial times to the present.").subject == "U.S. history"
    assert read("Write a guide to Vue.js for web developers.").subject == "Vue.js"
    assert read("Explain how the U.S. Senate works. Cover filibusters.").subject == "how the U.S. Senate works"


def test_a_list_names_the_concerns_and_a_request_for_people_is_about_their_work():
    reading = read("A field handbook for volunteer trail builders on drainage, switchbacks, tool safety and erosion.")
    assert reading.subject == "trail builders" and reading.kind == "role"
    assert reading.concerns == ("drainage", "switchbacks", "tool safety", "erosion")
    reading = read("Write a guide to home composting: choosing a bin, what to put in, and turning the heap.")
    assert reading.concerns[:2] == ("choosing a bin", "what to put in"), "a clause led by 'what' is one concern"


def test_a_briefs_story_gives_its_subject_when_the_book_names_only_people_or_a_list():
    brief = (
        "I run a small bakery with six part-time staff. Write me a handbook on food hygiene rules, allergen "
        "labelling and training part-time staff, so that new people can start on a Monday and be safe by Friday."
    )
    reading = read(brief)
    assert reading.subject == "small bakery"
    assert set(reading.concerns) >= {"food hygiene rules", "allergen labelling", "training part-time staff"}
    assert not {"Monday", "Friday", "new people"} & set(reading.concerns + reading.audience)
    charity = (
        "Our charity sends volunteers to visit isolated elderly people in their homes. Most visits are on weekday "
        "afternoons. We need a guide for the volunteers on first visits, spotting signs of neglect, and keeping "
        "boundaries. It should be warm in tone and short enough to read on a bus."
    )
    reading = read(charity)
    assert reading.subject == "visiting isolated elderly people" and "weekday afternoons" not in reading.concerns
    assert "first visits" in reading.concerns and "bus" not in reading.concerns, "a brief's cue-less sentence"


def test_a_brief_that_opens_with_the_asker_is_about_what_they_run_never_the_asker():
    keeper = (
        "I'm the warden of the Elmley Bird Hide, a small reserve that opens at weekends. We need a handbook for "
        "our volunteer guides on identifying waders, talking to visitors and closing up the hide."
    )
    assert read(keeper).subject == "running the Elmley Bird Hide"
    partners = (
        "My husband and I have kept a guest house in Keswick for twenty years, and we'd like a handbook "
        "for the business. It should cover bookings, breakfasts and cleaning between guests."
    )
    assert read(partners).subject == "keeping a guest house"
    assert read("I'm head of science at a large school and want a guide to lab safety.").subject != "running science"


def test_offensive_words_are_found_as_whole_words_only():
    assert offensive_words("What the fuck is a starter") == ["fuck"]
    assert offensive_words("An artisanal loaf from Scunthorpe") == [], "no word hides inside another"
    assert offensive_words("") == []
