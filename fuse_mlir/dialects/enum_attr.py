"""The printed form every enum attribute of the fuse dialects shares: ``#dialect.name<value>``.

xDSL's :class:`EnumAttribute` prints its value bare and cannot be subclassed twice, so the angle brackets
(linalg's ``#linalg.iterator_type<parallel>`` form) come from this mixin, listed before ``EnumAttribute[E]``.
"""

from __future__ import annotations

from typing import ClassVar, Generic, TypeVar, cast

from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.str_enum import StrEnum

E = TypeVar("E", bound=StrEnum)


class AngleBracketEnum(Generic[E]):
    """Mixin for ``class A(AngleBracketEnum[E], EnumAttribute[E])``: parse and print the value as ``<value>``.

    A value outside the enum is a parse error that lists the valid ones (xDSL's ``parse_str_enum``).
    """

    enum_type: ClassVar[type[StrEnum]]
    data: E

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> E:
        with parser.in_angle_brackets():
            return cast(E, parser.parse_str_enum(cls.enum_type))

    def print_parameter(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_identifier_or_string_literal(self.data.value)


__all__ = ["AngleBracketEnum"]
