"""A throwaway stage, as a new stage is added: this package plus one declaration (``test_adding_a_stage``)."""
